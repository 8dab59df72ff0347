"""Session keys in every key of a session-scoped table, and stored plans partitioned by week.

Sessions: a session created from now on gets a row id derived from its tenant and name
(`app.domain.ids.session_key`, which `contextd_session_key` computes in SQL), so a lookup by
name carries the session key. Sessions created before keep their ids (their facts cannot be
rewritten): `contextd_has_legacy_sessions()` says whether any exist, a constant the planner
folds, so that on a database without them a lookup by name is by session key alone. The unique
constraint on (tenant_id, external_id) becomes a plain index: names stay unique per tenant by
construction (a derived key is the primary key).

Stored plans (`assemblies`) gain `session_key` (the session's row id, or for a stateless plan
the tenant id negated) and a primary key and unique constraint that carry it and `created_at`.
On PostgreSQL the table becomes partitioned by range of `created_at`, a partition per week
(`assemblies_pYYYYMMDD`, the week starting that Monday, UTC) and a default one; its rows are
copied (every week holding a plan gets its partition), its id sequence kept, so every public
id stays what it was. The table is locked while its rows are copied. SQLite's table is not
partitioned: it gains the column and the constraint in place.

Revision ID: 20261205_0011
Revises: 20261204_0010
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from datetime import date, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "20261205_0011"
down_revision: str | None = "20261204_0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IDENTITY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)
COLUMNS = (
    "id, tenant_id, external_id, session_id, as_of_seq, unit, phase, plan_hash, request,"
    " response, fingerprints, created_at, grounding"
)
# The column list is a constant: nothing a caller sends goes into these statements.
COPY_IN = (
    f"INSERT INTO assemblies ({COLUMNS}, session_key)"  # noqa: S608
    f" SELECT {COLUMNS}, coalesce(session_id, -tenant_id) FROM assemblies_unpartitioned"
)
COPY_BACK = (
    f"INSERT INTO assemblies_unpartitioned ({COLUMNS})"  # noqa: S608
    f" SELECT {COLUMNS} FROM assemblies"
)
LINEAGE_KEY = ["tenant_id", "session_key", sa.text("coalesce(unit, '')"), "id"]
OLD_LINEAGE_KEY = [
    "tenant_id",
    sa.text("coalesce(session_id, 0)"),
    sa.text("coalesce(unit, '')"),
    "id",
]
# Unnamed SQLite constraints are found by these names in batch mode.
SQLITE_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}

# The same value as `app.domain.ids.session_key`: the first 8 bytes of the MD5 of
# '<tenant>/<name>', big-endian, 62 bits of them above 2**62. SQL and IMMUTABLE, so that the
# planner inlines it and folds it to a constant for the values of a query.
SESSION_KEY_FUNCTION = """
CREATE FUNCTION contextd_session_key(tenant_id bigint, external_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ((('x' || substr(md5(tenant_id::text || '/' || external_id), 1, 16))::bit(64)::bigint)
            & 4611686018427387903) | 4611686018427387904
$$
"""


def _legacy_function(has_legacy: bool) -> str:
    value = "true" if has_legacy else "false"
    return f"""
CREATE OR REPLACE FUNCTION contextd_has_legacy_sessions() RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {value} $$
"""


def _week_partition(week: date) -> str:
    """The partition of the week starting `week` (a Monday); the service's retention names
    them the same way (`app.storage.retention`)."""
    end = week + timedelta(days=7)
    return (
        f"CREATE TABLE assemblies_p{week:%Y%m%d} PARTITION OF assemblies"
        f" FOR VALUES FROM ('{week.isoformat()} 00:00:00+00') TO ('{end.isoformat()} 00:00:00+00')"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgresql()
    else:
        _upgrade_sqlite()


def _upgrade_postgresql() -> None:
    bind = op.get_bind()
    op.drop_constraint("sessions_tenant_id_external_id_key", "sessions", type_="unique")
    op.create_index("ix_sessions_tenant_external", "sessions", ["tenant_id", "external_id"])
    op.execute(SESSION_KEY_FUNCTION)
    has_legacy = bool(bind.execute(sa.text("SELECT EXISTS (SELECT 1 FROM sessions)")).scalar())
    op.execute(_legacy_function(has_legacy))

    op.execute("ALTER TABLE assemblies RENAME TO assemblies_unpartitioned")
    op.execute(
        "ALTER TABLE assemblies_unpartitioned DROP CONSTRAINT assemblies_pkey,"
        " DROP CONSTRAINT assemblies_tenant_id_external_id_key"
    )
    op.drop_index("ix_assemblies_lineage_key", table_name="assemblies_unpartitioned")
    op.drop_index("ix_assemblies_created_at", table_name="assemblies_unpartitioned")
    op.create_table(
        "assemblies",
        sa.Column(
            "id",
            sa.BigInteger(),
            nullable=False,
            server_default=sa.text("nextval('assemblies_id_seq'::regclass)"),
        ),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=True),
        sa.Column("session_id", sa.BigInteger(), nullable=True),
        sa.Column("session_key", sa.BigInteger(), nullable=False),
        sa.Column("as_of_seq", sa.BigInteger(), nullable=True),
        sa.Column("unit", sa.String(200), nullable=True),
        sa.Column("phase", sa.String(200), nullable=True),
        sa.Column("plan_hash", sa.String(64), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("fingerprints", sa.JSON(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("grounding", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", "session_key", "created_at", name="assemblies_pkey"),
        sa.UniqueConstraint(
            "tenant_id",
            "external_id",
            "session_key",
            "created_at",
            name="uq_assemblies_external_id",
        ),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name="assemblies_tenant_id_fkey"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="assemblies_session_id_fkey"),
        postgresql_partition_by="RANGE (created_at)",
    )
    # Partitions take their columns' compression from the partitioned table (see 0010).
    op.execute(
        "DO $$ BEGIN"
        " ALTER TABLE assemblies ALTER COLUMN request SET COMPRESSION lz4;"
        " ALTER TABLE assemblies ALTER COLUMN response SET COMPRESSION lz4;"
        " ALTER TABLE assemblies ALTER COLUMN fingerprints SET COMPRESSION lz4;"
        " EXCEPTION WHEN feature_not_supported THEN NULL; END $$"
    )
    op.create_index("ix_assemblies_lineage_key", "assemblies", LINEAGE_KEY)
    op.create_index("ix_assemblies_created_at", "assemblies", ["created_at"])
    op.execute("CREATE TABLE assemblies_default PARTITION OF assemblies DEFAULT")
    weeks = bind.execute(
        sa.text(
            "SELECT DISTINCT date_trunc('week', created_at AT TIME ZONE 'UTC')::date"
            " FROM assemblies_unpartitioned"
            " UNION SELECT date_trunc('week', now() AT TIME ZONE 'UTC')::date + step"
            " FROM (VALUES (0), (7)) AS ahead (step)"
        )
    ).scalars()
    for week in sorted(weeks):
        op.execute(_week_partition(week))
    op.execute(COPY_IN)
    # The sequence goes on numbering plans where it stopped: a public id is never reused.
    op.execute("ALTER SEQUENCE assemblies_id_seq OWNED BY assemblies.id")
    op.drop_table("assemblies_unpartitioned")


def _upgrade_sqlite() -> None:
    with op.batch_alter_table("sessions", naming_convention=SQLITE_NAMES) as batch:
        batch.drop_constraint("uq_sessions_tenant_id", type_="unique")
    op.create_index("ix_sessions_tenant_external", "sessions", ["tenant_id", "external_id"])
    # Batch mode cannot carry an expression index over: it is made again after.
    op.drop_index("ix_assemblies_lineage_key", table_name="assemblies")
    op.add_column("assemblies", sa.Column("session_key", sa.BigInteger(), nullable=True))
    op.execute("UPDATE assemblies SET session_key = coalesce(session_id, -tenant_id)")
    with op.batch_alter_table("assemblies", naming_convention=SQLITE_NAMES) as batch:
        batch.alter_column("session_key", existing_type=sa.BigInteger(), nullable=False)
        batch.drop_constraint("uq_assemblies_tenant_id", type_="unique")
        batch.create_unique_constraint(
            "uq_assemblies_external_id", ["tenant_id", "external_id", "session_key", "created_at"]
        )
    op.create_index("ix_assemblies_lineage_key", "assemblies", LINEAGE_KEY)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _downgrade_postgresql()
    else:
        _downgrade_sqlite()


def _downgrade_postgresql() -> None:
    op.create_table(
        "assemblies_unpartitioned",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=True),
        sa.Column("session_id", sa.BigInteger(), nullable=True),
        sa.Column("as_of_seq", sa.BigInteger(), nullable=True),
        sa.Column("unit", sa.String(200), nullable=True),
        sa.Column("phase", sa.String(200), nullable=True),
        sa.Column("plan_hash", sa.String(64), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("fingerprints", sa.JSON(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("grounding", sa.JSON(), nullable=True),
    )
    op.execute(COPY_BACK)
    op.execute("ALTER SEQUENCE assemblies_id_seq OWNED BY assemblies_unpartitioned.id")
    op.drop_table("assemblies")  # its partitions with it
    op.rename_table("assemblies_unpartitioned", "assemblies")
    op.execute(
        "ALTER TABLE assemblies ALTER COLUMN id SET DEFAULT nextval('assemblies_id_seq'::regclass)"
    )
    op.create_primary_key("assemblies_pkey", "assemblies", ["id"])
    op.create_unique_constraint(
        "assemblies_tenant_id_external_id_key", "assemblies", ["tenant_id", "external_id"]
    )
    op.create_foreign_key(
        "assemblies_tenant_id_fkey", "assemblies", "tenants", ["tenant_id"], ["id"]
    )
    op.create_foreign_key(
        "assemblies_session_id_fkey", "assemblies", "sessions", ["session_id"], ["id"]
    )
    op.execute(
        "DO $$ BEGIN"
        " ALTER TABLE assemblies ALTER COLUMN request SET COMPRESSION lz4;"
        " ALTER TABLE assemblies ALTER COLUMN response SET COMPRESSION lz4;"
        " ALTER TABLE assemblies ALTER COLUMN fingerprints SET COMPRESSION lz4;"
        " EXCEPTION WHEN feature_not_supported THEN NULL; END $$"
    )
    op.create_index("ix_assemblies_lineage_key", "assemblies", OLD_LINEAGE_KEY)
    op.create_index("ix_assemblies_created_at", "assemblies", ["created_at"])
    op.execute("DROP FUNCTION contextd_has_legacy_sessions()")
    op.execute("DROP FUNCTION contextd_session_key(bigint, text)")
    op.drop_index("ix_sessions_tenant_external", table_name="sessions")
    op.create_unique_constraint(
        "sessions_tenant_id_external_id_key", "sessions", ["tenant_id", "external_id"]
    )


def _downgrade_sqlite() -> None:
    op.drop_index("ix_assemblies_lineage_key", table_name="assemblies")
    with op.batch_alter_table("assemblies") as batch:
        batch.drop_constraint("uq_assemblies_external_id", type_="unique")
        batch.create_unique_constraint("uq_assemblies_tenant_id", ["tenant_id", "external_id"])
        batch.drop_column("session_key")
    op.create_index("ix_assemblies_lineage_key", "assemblies", OLD_LINEAGE_KEY)
    op.drop_index("ix_sessions_tenant_external", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.create_unique_constraint("uq_sessions_tenant_id", ["tenant_id", "external_id"])
