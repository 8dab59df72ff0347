"""A stored plan may be kept as its difference from an earlier plan of its lineage.

Consecutive plans of one lineage show mostly the same items: a new plan's `response` and
`fingerprints` may be stored as deltas (`app.domain.json_delta`) against those of a plan of
the same lineage stored whole, which `base_id` names. Existing plans are stored whole
(`base_id` NULL) and read as they are.

Revision ID: 20261206_0013
Revises: 20261205_0012
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0013"
down_revision: str | None = "20261205_0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assemblies", sa.Column("base_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("assemblies", "base_id")
