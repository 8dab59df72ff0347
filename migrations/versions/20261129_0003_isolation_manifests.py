"""Child sessions (delegate, fork) and versioned load manifests.

Revision ID: 20261129_0003
Revises: 20261129_0002
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0003"
down_revision: str | None = "20261129_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IDENTITY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("parent_id", IDENTITY, nullable=True))
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="root"))
        batch.add_column(sa.Column("fork_seq", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("inherit", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("unit", sa.String(200), nullable=True))
        batch.create_foreign_key("fk_sessions_parent", "sessions", ["parent_id"], ["id"])
    op.create_table(
        "manifests",
        sa.Column("tenant_id", IDENTITY, sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("manifests")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_constraint("fk_sessions_parent", type_="foreignkey")
        for column in ("unit", "inherit", "fork_seq", "kind", "parent_id"):
            batch.drop_column(column)
