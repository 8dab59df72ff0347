"""Evaluations run as jobs: their state, progress and answer (`app.usecases.evaluation_jobs`).

Not facts: a job's row is updated as it runs, and says where it stands to whichever process
is asked (a restart loses the runner; the row's stale `updated_at` tells so).

Revision ID: 20261207_0017
Revises: 20261206_0016
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261207_0017"
down_revision: str | None = "20261206_0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.BigInteger(), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("calls_done", sa.BigInteger(), nullable=False),
        sa.Column("calls_total", sa.BigInteger(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_evaluations_tenant_status", "evaluations", ["tenant_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_evaluations_tenant_status", "evaluations")
    op.drop_table("evaluations")
