"""Stored assemblies: request, response and plan of every /assemble call.

Revision ID: 20261129_0002
Revises: 20261129_0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0002"
down_revision: str | None = "20261129_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IDENTITY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # The request is kept as the exact JSON text received (no re-serialisation on the hot
    # path); plain JSON, not JSONB, for the rest: read back whole, never queried.
    op.create_table(
        "assemblies",
        sa.Column("id", IDENTITY, primary_key=True),
        sa.Column("tenant_id", IDENTITY, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=True),
        sa.Column("session_id", IDENTITY, sa.ForeignKey("sessions.id"), nullable=True),
        sa.Column("as_of_seq", sa.BigInteger(), nullable=True),
        sa.Column("unit", sa.String(200), nullable=True),
        sa.Column("phase", sa.String(200), nullable=True),
        sa.Column("plan_hash", sa.String(64), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("fingerprints", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant_id", "external_id"),
    )
    op.create_index(
        "ix_assemblies_lineage", "assemblies", ["tenant_id", "session_id", "unit", "id"]
    )
    op.create_index("ix_assemblies_created_at", "assemblies", ["created_at"])
    if op.get_bind().dialect.name == "postgresql":
        # lz4 TOAST compression: large documents (stored requests and responses, big items)
        # are written faster than with the default pglz.
        for table, column in (
            ("assemblies", "request"),
            ("assemblies", "response"),
            ("facts", "item"),
        ):
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE facts ALTER COLUMN item SET COMPRESSION default")
    op.drop_index("ix_assemblies_created_at", table_name="assemblies")
    op.drop_index("ix_assemblies_lineage", table_name="assemblies")
    op.drop_table("assemblies")
