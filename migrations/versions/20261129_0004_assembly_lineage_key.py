"""Look up the previous assembly of a lineage by equality on every key column.

`session_id IS NULL` (a stateless call) cannot use an index's order, so the latest stateless
assembly of a tenant was found by sorting all of them. The lineage key now maps NULL to a value
(0 for the session, '' for the unit), and the lookup walks the index backwards to one row.

Revision ID: 20261129_0004
Revises: 20261129_0003
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0004"
down_revision: str | None = "20261129_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_assemblies_lineage", table_name="assemblies")
    op.create_index(
        "ix_assemblies_lineage_key",
        "assemblies",
        [
            "tenant_id",
            sa.text("coalesce(session_id, 0)"),
            sa.text("coalesce(unit, '')"),
            "id",
        ],
    )


def downgrade() -> None:
    op.drop_index("ix_assemblies_lineage_key", table_name="assemblies")
    op.create_index(
        "ix_assemblies_lineage", "assemblies", ["tenant_id", "session_id", "unit", "id"]
    )
