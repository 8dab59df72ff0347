"""An assembly records how it served the next action its model took (next-action grounding).

Written once, after the assembly, when the model's output is appended; NULL until then (and for
assemblies whose output never came, or came after another).

Revision ID: 20261204_0009
Revises: 20261202_0008
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0009"
down_revision: str | None = "20261202_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assemblies", sa.Column("grounding", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("assemblies", "grounding")
