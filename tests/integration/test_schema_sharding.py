"""The migrated schema fits a database sharded on the session key (`deploy/citus.sql`).

Read from the catalog of the migrated PostgreSQL database, not from the models: every primary
key and unique constraint of a session-scoped table holds its session key, every foreign key
between two of them carries it on both sides or is dropped by the sharded DDL, every table is
distributed or replicated there, and a lookup of a session by name is by its key alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, select, text

from app.domain.errors import SessionKeyCollision
from app.domain.ids import session_key
from app.settings import Settings
from app.storage import session_rows, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from app.storage.session_rows import IS_NAMED_SESSION
from app.storage.tables import SessionRow
from tests.builders import user_msg
from tests.statements import statements_matching

SHARDED_DDL = Path(__file__).resolve().parents[2] / "deploy" / "citus.sql"
REFERENCE_TABLES = {"tenants", "api_keys", "manifests"}
LOCAL_TABLES = {"alembic_version"}
# Tables of the schema, without the partitions of a partitioned one.
_TABLES = text(
    "SELECT relname FROM pg_class"
    " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
    " AND NOT relispartition"
)
_COLUMNS = text(
    "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:table AS regclass)"
    " AND attnum > 0 AND NOT attisdropped"
)
_UNIQUE_INDEXES = text(
    "SELECT index.relname, array_agg(attribute.attname)"
    " FROM pg_index"
    " JOIN pg_class index ON index.oid = pg_index.indexrelid"
    " LEFT JOIN pg_attribute attribute ON attribute.attrelid = pg_index.indrelid"
    "  AND attribute.attnum = ANY (pg_index.indkey)"
    " WHERE pg_index.indrelid = CAST(:table AS regclass) AND pg_index.indisunique"
    " GROUP BY index.relname"
)
_FOREIGN_KEYS = text(
    "SELECT conname, conrelid::regclass::text, confrelid::regclass::text,"
    " ARRAY(SELECT attname FROM unnest(conkey) WITH ORDINALITY AS k(num, pos)"
    "  JOIN pg_attribute ON attrelid = conrelid AND attnum = k.num ORDER BY k.pos),"
    " ARRAY(SELECT attname FROM unnest(confkey) WITH ORDINALITY AS k(num, pos)"
    "  JOIN pg_attribute ON attrelid = confrelid AND attnum = k.num ORDER BY k.pos)"
    " FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
    " AND conparentid = 0"
)


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = create_engine(postgres_url)
    yield engine
    engine.dispose()


def _sharded_ddl() -> str:
    return SHARDED_DDL.read_text()


def _distributed(ddl: str) -> dict[str, str]:
    """Each distributed table of the sharded DDL, with its distribution column."""
    return dict(re.findall(r"create_distributed_table\('(\w+)', '(\w+)'", ddl))


def test_every_table_is_distributed_or_replicated_by_the_sharded_ddl(engine: Engine) -> None:
    ddl = _sharded_ddl()
    with engine.connect() as connection:
        tables = set(connection.execute(_TABLES).scalars())
    referenced = set(re.findall(r"create_reference_table\('(\w+)'\)", ddl))
    assert referenced == REFERENCE_TABLES
    assert tables - LOCAL_TABLES <= set(_distributed(ddl)) | referenced


def test_every_session_scoped_key_holds_the_session_key(engine: Engine) -> None:
    """Each primary key and unique index (the partitioned table's, which its partitions
    inherit) of a distributed table holds its distribution column."""
    lacking = {}
    with engine.connect() as connection:
        tables = set(connection.execute(_TABLES).scalars())
        for table, column in _distributed(_sharded_ddl()).items():
            if table not in tables:
                continue  # named ahead of the migration that makes it
            assert column in set(connection.execute(_COLUMNS, {"table": table}).scalars())
            for index, columns in connection.execute(_UNIQUE_INDEXES, {"table": table}):
                if column not in columns:
                    lacking[index] = columns
    assert lacking == {}


def test_foreign_keys_between_session_scoped_tables_carry_the_key_or_are_dropped(
    engine: Engine,
) -> None:
    ddl = _sharded_ddl()
    distributed = _distributed(ddl)
    dropped = set(re.findall(r"ALTER TABLE \w+ DROP CONSTRAINT (\w+);", ddl))
    kept: set[str] = set()
    unfit: set[str] = set()
    with engine.connect() as connection:
        for name, table, target, columns, targets in connection.execute(_FOREIGN_KEYS):
            if table not in distributed or target not in distributed:
                continue  # to a reference table, or between reference tables
            fits = (distributed[table], distributed[target]) in zip(columns, targets, strict=True)
            (kept if fits else unfit).add(name)
    assert unfit == dropped
    assert kept == {"facts_session_id_fkey", "checkpoints_session_id_fkey"}


def test_a_lookup_by_name_is_by_session_key_alone_without_legacy_sessions(
    postgres_url: str,
) -> None:
    """The test database was migrated empty: the lookup's legacy branch folds away, and the
    session key the database computes is the service's."""
    engine = create_db_engine(Settings(database_url=postgres_url))
    lookup = select(SessionRow.id).where(*IS_NAMED_SESSION)
    compiled = lookup.compile(engine, compile_kwargs={"render_postcompile": True})
    names = {"tenant_id": 7, "external_id": "a session:1"}
    with engine.connect() as connection:
        computed = connection.scalar(
            text("SELECT contextd_session_key(:tenant_id, :external_id)"), names
        )
        plan = "\n".join(
            connection.exec_driver_sql(
                f"EXPLAIN {compiled.string}", {**compiled.params, **names}
            ).scalars()
        )
    engine.dispose()
    assert computed == session_key(7, "a session:1")
    assert f"(id = '{computed}'::bigint)" in plan
    assert "<" not in plan  # no range over serial ids


@pytest.mark.sqlite
def test_a_session_id_is_its_derived_key_and_a_colliding_name_is_refused(
    database_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=database_url))
    factory = create_session_factory(engine)

    def create(db: object, name: str | None) -> SessionRow:
        assert db is not None
        row, _ = session_rows.create_session(
            db,  # type: ignore[arg-type]
            tenant_id=tenant_id,
            external_id=name,
            encoding="o200k_base",
            context_window=1000,
            model=None,
            attributes={},
            derive_id=lambda number: f"unnamed-{session_id}-{number}",
        )
        return row

    with factory() as db:
        tenant_id = tenant_rows.ensure_tenant(db, "session-keys")
        named, unnamed = create(db, session_id), create(db, None)
        # A row holding the key another name derives: the name is refused, not merged.
        taken = session_key(tenant_id, f"{session_id}-taken")
        db.execute(
            text(
                "INSERT INTO sessions (id, tenant_id, external_id, encoding, context_window,"
                " attributes, last_seq, created_at, kind, inherit)"
                " VALUES (:id, :tenant, 'another', 'o200k_base', 1, '{}', 0, :now, 'root', '{}')"
            ),
            {"id": taken, "tenant": tenant_id, "now": named.created_at},
        )
        with pytest.raises(SessionKeyCollision):
            create(db, f"{session_id}-taken")
        found = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
        db.rollback()
    engine.dispose()
    assert named.id == session_key(tenant_id, session_id)
    assert unnamed.id == session_key(tenant_id, unnamed.external_id or "")
    assert found.id == named.id


def test_a_usage_report_reads_its_plan_by_the_session_key(
    client: TestClient, session_id: str
) -> None:
    """`POST /sessions/{id}/usage` knows its session: it reads the plan it names, and its
    lineage's call before it, on that session's shard only, and only a plan of another session
    is looked for everywhere (then refused)."""
    other = f"{session_id}-other"
    for name in (session_id, other):
        assert client.post("/sessions", json={"session_id": name}).status_code == 201
        appended = client.post(f"/sessions/{name}/items", json={"items": [user_msg("hello")]})
        assert appended.status_code == 201, appended.text
    assembled = client.post("/assemble", json={"session_id": session_id, "sources": []})
    assert assembled.status_code == 201, assembled.text
    assembly_id = assembled.json()["assembly_id"]
    engine = client.app.state.engine  # type: ignore[attr-defined]
    with statements_matching(engine, r"\bFROM assemblies\b") as reads:
        report = {"assembly_id": assembly_id, "input_tokens": 0, "cached_tokens": 0}
        assert client.post(f"/sessions/{session_id}/usage", json=report).status_code == 204
        routed = list(reads)
        reads.clear()
        refused = client.post(f"/sessions/{other}/usage", json=report)
    # The plan, and when its lineage's call before it was made (the cache outcome's idle time).
    assert len(routed) == 2
    assert all("assemblies.session_key = " in read for read in routed)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "assembly_of_another_session"
    # The routed miss, then the lookup everywhere that tells a plan of another session.
    assert len(reads) == 2
    assert "session_key" not in reads[1].split("WHERE", 1)[1]
