"""Each fact records the database timeline that wrote it.

PostgreSQL starts a new timeline each time a standby is promoted. With an asynchronous standby,
commits the old primary acknowledged may never have reached the new one, and their seqs are
given again to the next appends: a seq then names other content, on another timeline. The
column lets a client that holds a seq and its timeline tell the two apart.

On PostgreSQL the column defaults to the timeline of the WAL being written (the first eight hex
digits of the current WAL file's name), evaluated by the server for each row it inserts. The
default is set after the column is added, so existing facts keep NULL ("written before
timelines were recorded"): a volatile default given with the column would rewrite the table
and stamp every old fact with today's timeline. SQLite has no replication: NULL there.

Revision ID: 20261206_0014
Revises: 20261206_0013
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0014"
down_revision: str | None = "20261206_0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_TIMELINE = "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer"


def upgrade() -> None:
    op.add_column("facts", sa.Column("timeline", sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE facts ALTER COLUMN timeline SET DEFAULT {CURRENT_TIMELINE}")


def downgrade() -> None:
    op.drop_column("facts", "timeline")
