"""Keep what was sent in Chat or Anthropic form beside each Responses-form item.

A fact's `item` is the Responses form the service works on; provider fields that form has no
place for (Anthropic `is_error`, `cache_control`, ...) ride on it, but "exactly as sent" needs
the message itself. The column is nullable: items sent as Responses are their own original.

Revision ID: 20261202_0006
Revises: 20261202_0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261202_0006"
down_revision: str | None = "20261202_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("facts", sa.Column("original", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("facts", "original")
