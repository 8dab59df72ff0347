"""Each stored assembly keeps what its prompt prefix was built from.

A short JSON list (`app.domain.assemble.cache_break.PrefixState.stored`): the output format,
digests of the tool definitions and of the request's own settings, its sources' names, the
session's compaction, retraction, goal, world-state and exclusion counters, and where the history
sat. The lineage's
next assembly compares its own with it to name why the reused prefix broke. NULL for assemblies
stored before (their successor names no cause it cannot know: `unknown` is not a cause, so no
break is named against them).

Revision ID: 20261206_0015
Revises: 20261206_0014
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0015"
down_revision: str | None = "20261206_0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("assemblies", sa.Column("prefix_state", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("assemblies", "prefix_state")
