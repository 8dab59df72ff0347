"""A session's calibration: the ratio of provider tokens per encoding token its usage reports
taught, with the assemblies already counted (JSON, None until the first report).

Revision ID: 20261202_0005
Revises: 20261129_0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261202_0005"
down_revision: str | None = "20261129_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("calibration", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("calibration")
