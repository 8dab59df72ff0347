"""API keys can be revoked: a revoked key is kept with the time it was revoked.

Deleting the row would be simpler, but the service decides whether it runs open by whether any
key exists: revoking the last key must not open it to everyone.

Revision ID: 20261202_0008
Revises: 20261202_0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261202_0008"
down_revision: str | None = "20261202_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "revoked_at")
