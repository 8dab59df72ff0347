"""Large JSON and text columns are compressed with lz4 on PostgreSQL.

A stored plan (its request, answer and fingerprints) and a fact's item are written on every
call; PostgreSQL compresses such values when it stores them out of line, by default with pglz.
lz4 writes them about twice as fast and a fifth smaller (`docs/performance.md`, "Plan store").
Only values written from now on are compressed so; older ones read as they are. A server built
without lz4 keeps pglz, and SQLite has no such setting.

Revision ID: 20261204_0010
Revises: 20261204_0009
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261204_0010"
down_revision: str | None = "20261204_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("assemblies", "request"),
    ("assemblies", "response"),
    ("assemblies", "fingerprints"),
    ("facts", "item"),
    ("facts", "original"),
)


def _set_compression(method: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    statements = " ".join(
        f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method};"
        for table, column in COLUMNS
    )
    op.execute(f"DO $$ BEGIN {statements} EXCEPTION WHEN feature_not_supported THEN NULL; END $$")


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")
