"""Checkpoints: each session's latest fold and what is derived from it, so that a worker new to
the session reads the checkpoint and the facts after it, not the whole log
(`app.storage.checkpoints`).

Derived data, not facts: rows are replaced as logs grow, and may be deleted at any time.

Revision ID: 20261207_0018
Revises: 20261207_0017
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261207_0018"
down_revision: str | None = "20261207_0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column(
            "session_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("sessions.id"),
            primary_key=True,
        ),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("derivation", sa.String(64), nullable=False),
        sa.Column("log_digest", sa.String(64), nullable=False),
        sa.Column("body_digest", sa.String(64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("checkpoints")
