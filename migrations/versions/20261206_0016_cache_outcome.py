"""Each stored assembly keeps the class of its provider's prompt-cache outcome.

Set when a usage report names the assembly (`app.domain.prompt_cache.classify_outcome`):
`as_predicted`, `below_minimum`, `expired`, `evicted` or `more_than_predicted`. NULL until then.
Plans are not facts: this column is updated, as `grounding` is.

Revision ID: 20261206_0016
Revises: 20261206_0015
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0016"
down_revision: str | None = "20261206_0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assemblies", sa.Column("cache_outcome", sa.String(32), nullable=True))


def downgrade() -> None:
    op.drop_column("assemblies", "cache_outcome")
