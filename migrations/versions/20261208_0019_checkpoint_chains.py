"""Checkpoints as chains: a session's checkpoint is written whole now and then, and as deltas
against its previous link between, so that a write costs what changed and a worker new to the
session folds few facts beyond the newest link (`app.storage.checkpoints`). One row per link,
keyed by (session, seq).

A whole link also holds the grader's occurrence index of the log (`index_body`), read only
when a worker new to the session first grades an action.

Derived data, not facts: the rows a previous version wrote are dropped (that version's bodies
would be derived again anyway: another code derived them).

Revision ID: 20261208_0019
Revises: 20261207_0018
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261208_0019"
down_revision: str | None = "20261207_0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        # SQLite cannot change a table's primary key in place; its rows are derived data.
        op.drop_table("checkpoints")
        _create(["session_id", "last_seq"], chains=True)
        _index()
        return
    op.execute("DELETE FROM checkpoints")
    op.add_column("checkpoints", sa.Column("base_seq", sa.BigInteger(), nullable=False))
    op.add_column("checkpoints", sa.Column("previous_seq", sa.BigInteger(), nullable=True))
    op.add_column("checkpoints", sa.Column("previous_digest", sa.String(64), nullable=True))
    op.add_column("checkpoints", sa.Column("index_digest", sa.String(64), nullable=True))
    op.add_column("checkpoints", sa.Column("index_body", sa.LargeBinary(), nullable=True))
    # The body is compressed already: stored out of line as it is, not compressed again.
    op.execute("ALTER TABLE checkpoints ALTER COLUMN body SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE checkpoints ALTER COLUMN index_body SET STORAGE EXTERNAL")
    op.drop_constraint("checkpoints_pkey", "checkpoints", type_="primary")
    op.create_primary_key("checkpoints_pkey", "checkpoints", ["session_id", "last_seq"])
    _index()


def _index() -> None:
    # Retention finds the links written before its cutoff (`checkpoints.prune`).
    op.create_index("ix_checkpoints_created_at", "checkpoints", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_checkpoints_created_at", "checkpoints")
    if op.get_bind().dialect.name != "postgresql":
        op.drop_table("checkpoints")
        _create(["session_id"], chains=False)
        return
    op.execute("DELETE FROM checkpoints")
    op.drop_constraint("checkpoints_pkey", "checkpoints", type_="primary")
    op.create_primary_key("checkpoints_pkey", "checkpoints", ["session_id"])
    op.drop_column("checkpoints", "index_body")
    op.drop_column("checkpoints", "index_digest")
    op.drop_column("checkpoints", "previous_digest")
    op.drop_column("checkpoints", "previous_seq")
    op.drop_column("checkpoints", "base_seq")


def _create(key: list[str], *, chains: bool) -> None:
    links = (
        [
            sa.Column("base_seq", sa.BigInteger(), nullable=False),
            sa.Column("previous_seq", sa.BigInteger(), nullable=True),
            sa.Column("previous_digest", sa.String(64), nullable=True),
            sa.Column("index_digest", sa.String(64), nullable=True),
            sa.Column("index_body", sa.LargeBinary(), nullable=True),
        ]
        if chains
        else []
    )
    op.create_table(
        "checkpoints",
        sa.Column(
            "session_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("sessions.id"),
            nullable=False,
        ),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("derivation", sa.String(64), nullable=False),
        sa.Column("log_digest", sa.String(64), nullable=False),
        sa.Column("body_digest", sa.String(64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        *links,
        sa.PrimaryKeyConstraint(*key, name="checkpoints_pkey"),
    )
