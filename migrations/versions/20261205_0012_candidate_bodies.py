"""Candidate bodies are stored once per session, by digest, and plans' requests name them.

A stored plan keeps its request; the candidates' bodies, offered again call after call, were
most of it. New plans store each body of 256 bytes or more once per session in
`candidate_bodies` and name it by digest (`app.domain.addressing`); older plans keep their
requests whole and read as they are. Bodies are compressed with lz4 where the server has it.

Revision ID: 20261205_0012
Revises: 20261205_0011
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261205_0012"
down_revision: str | None = "20261205_0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    identity = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "candidate_bodies",
        sa.Column("session_key", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", identity, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("digest", sa.String(32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "tenant_id", "digest"),
    )
    op.create_index("ix_candidate_bodies_created_at", "candidate_bodies", ["created_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DO $$ BEGIN ALTER TABLE candidate_bodies ALTER COLUMN body SET COMPRESSION lz4;"
            " EXCEPTION WHEN feature_not_supported THEN NULL; END $$"
        )


def downgrade() -> None:
    op.drop_index("ix_candidate_bodies_created_at", table_name="candidate_bodies")
    op.drop_table("candidate_bodies")
