"""Storage contract of the fact log, on PostgreSQL and on the SQLite default."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import DBAPIError

from app.domain.errors import Conflict, IdempotencyMismatch, SequenceConflict
from app.settings import Settings
from app.storage import fact_log, session_rows, tenant_rows
from app.storage.database import alembic_config, create_db_engine, create_session_factory
from app.storage.tables import Base, Fact, SessionRow
from tests.builders import tool_call, user_msg
from tests.integration.storage import append_items, new_session, server_timeline


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_db_engine(Settings(database_url=database_url))
    yield engine
    engine.dispose()


def test_facts_refuse_update_and_delete(engine: Engine, session_id: str) -> None:
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        append_items(db, session_pk, [user_msg("keep me")])
        db.commit()
    for statement in ("UPDATE facts SET tokens = 99", "DELETE FROM facts"):
        with engine.connect() as connection, pytest.raises(DBAPIError, match="append-only"):
            connection.execute(text(statement))
    with create_session_factory(engine)() as db:
        stored = db.scalars(select(Fact).where(Fact.session_id == session_pk)).all()
        assert [(f.seq, f.item, f.tokens) for f in stored] == [(1, user_msg("keep me"), 1)]


def test_append_assigns_dense_sequence_and_keeps_items_verbatim(
    engine: Engine, session_id: str
) -> None:
    session_pk = new_session(engine, session_id)
    odd_item: dict[str, object] = {"type": "vendor_event", "nested": {"list": [1, 2.5, None, "é"]}}
    with create_session_factory(engine)() as db:
        first = append_items(db, session_pk, [user_msg("a"), tool_call("c1")])
        second = append_items(db, session_pk, [odd_item])
        db.commit()
        assert [f.seq for f in first.facts] == [1, 2]
        assert [f.seq for f in second.facts] == [3]
        logged = fact_log.read_facts(db, session_id=session_pk)
        assert [(f.seq, f.type, f.item) for f in logged] == [
            (1, "message", user_msg("a")),
            (2, "function_call", tool_call("c1")),
            (3, "vendor_event", odd_item),
        ]


def test_expected_last_seq_mismatch_conflicts_and_writes_nothing(
    engine: Engine, session_id: str
) -> None:
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        append_items(db, session_pk, [user_msg("a")])
        db.commit()
        with pytest.raises(SequenceConflict) as caught:
            append_items(db, session_pk, [user_msg("b")], expected_last_seq=0)
        db.rollback()
        assert caught.value.details == {"expected": 0, "actual": 1}
        assert [f.seq for f in fact_log.read_facts(db, session_id=session_pk)] == [1]


def test_each_fact_records_the_timeline_that_wrote_it(engine: Engine, session_id: str) -> None:
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        written = append_items(db, session_pk, [user_msg("a"), user_msg("b")])
        db.commit()
        timeline = server_timeline(engine)
        assert written.timeline == timeline
        facts = fact_log.read_facts(db, session_id=session_pk)
        assert [(fact.seq, fact.timeline) for fact in facts] == [(1, timeline), (2, timeline)]


def test_idempotency_key_replays_original_result(engine: Engine, session_id: str) -> None:
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        pair = [user_msg("a"), {"type": "vendor_event", "n": 123456789012345678901234567890}]
        original = append_items(db, session_pk, pair, idempotency_key="turn-1", unit="u")
        db.commit()
        replay = append_items(db, session_pk, pair, idempotency_key="turn-1", unit="u")
        db.commit()
        assert replay == fact_log.AppendResult(
            facts=original.facts, replayed=True, timeline=server_timeline(engine)
        )
        for other in ([user_msg("other")], [*pair, user_msg("c")], pair[:1]):
            with pytest.raises(IdempotencyMismatch):
                append_items(db, session_pk, other, idempotency_key="turn-1", unit="u")
            db.rollback()
        with pytest.raises(IdempotencyMismatch):
            append_items(db, session_pk, pair, idempotency_key="turn-1", unit="v")
        db.rollback()
        assert len(fact_log.read_facts(db, session_id=session_pk)) == 2


def test_session_with_same_id_and_other_attributes_conflicts(
    engine: Engine, session_id: str
) -> None:
    new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        tenant_id = tenant_rows.ensure_tenant(db, "storage-tests")
        with pytest.raises(Conflict):
            session_rows.create_session(
                db,
                tenant_id=tenant_id,
                external_id=session_id,
                encoding="cl100k_base",
                context_window=1000,
                model=None,
                attributes={},
                derive_id=str,
            )


def test_concurrent_appenders_never_gap_duplicate_or_lose(
    postgres_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url))
    session_pk = new_session(engine, session_id)
    factory = create_session_factory(engine)
    writers, batches = 4, 25

    def write(writer: int) -> None:
        for batch in range(batches):
            with factory() as db:
                append_items(db, session_pk, [user_msg(f"{writer}-{batch}-{k}") for k in range(3)])
                db.commit()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with factory() as db:
        logged = fact_log.read_facts(db, session_id=session_pk)
        last_seq = db.scalar(select(SessionRow.last_seq).where(SessionRow.id == session_pk))
    texts = sorted(f.item["content"][0]["text"] for f in logged)
    expected = sorted(
        f"{w}-{b}-{k}" for w in range(writers) for b in range(batches) for k in range(3)
    )
    assert [f.seq for f in logged] == list(range(1, writers * batches * 3 + 1))
    assert texts == expected
    assert last_seq == writers * batches * 3
    engine.dispose()


# SQLite's reflection cannot read expression indexes back; PostgreSQL's compares them.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
def test_schema_matches_models_without_drift(engine: Engine) -> None:
    def is_modelled(name: str | None, kind: str, _parents: object) -> bool:
        # A partition of the stored plans is the partitioned table's, not a table of its own.
        return not (kind == "table" and name is not None and is_plan_partition(name))

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_name": is_modelled})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def is_plan_partition(name: str) -> bool:
    return re.fullmatch(r"assemblies_(default|p\d{8})", name) is not None


def test_migrations_round_trip(tmp_path: object, postgres_url: str) -> None:
    # A separate database so the shared test database keeps its data.
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = "contextd_roundtrip"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    config = alembic_config(url)
    command.upgrade(config, "head")
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    target = create_engine(url)
    with target.connect() as connection:
        tables = set(
            connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ).scalars()
        )
        tables = {name for name in tables if not is_plan_partition(name)}
        triggers = set(
            connection.execute(
                text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
            ).scalars()
        )
    target.dispose()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()
    assert tables == {
        "alembic_version",
        "tenants",
        "api_keys",
        "sessions",
        "facts",
        "assemblies",
        "manifests",
        "candidate_bodies",
        "evaluations",
        "checkpoints",
    }
    assert triggers == {"facts_append_only", "facts_no_truncate"}


def test_sqlite_migrations_round_trip(tmp_path: object) -> None:
    from pathlib import Path

    url = f"sqlite:///{Path(str(tmp_path)) / 'roundtrip.db'}"
    config = alembic_config(url)
    command.upgrade(config, "head")
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    engine = create_db_engine(Settings(database_url=url))
    with engine.connect() as connection:
        triggers = set(
            connection.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            ).scalars()
        )
    engine.dispose()
    assert triggers == {"facts_no_update", "facts_no_delete"}


@pytest.mark.sqlite
def test_timestamps_read_back_as_utc_in_both_engines(database_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app

    with TestClient(create_app(Settings(database_url=database_url))) as client:
        created = client.post("/sessions", json={}).json()
        appended = client.post(
            f"/sessions/{created['session_id']}/items",
            json={"items": [{"type": "message", "role": "user", "content": "hi"}]},
        )
        assert appended.status_code == 201
        logged = client.get(f"/sessions/{created['session_id']}/items").json()["items"][0]
        made = client.post("/assemble", json={"session_id": created["session_id"]}).json()
        stored = client.get(f"/assemblies/{made['assembly_id']}").json()
    # One form everywhere: UTC, written with Z, never a bare local time or a mix of forms.
    stamps = [created["created_at"], logged["recorded_at"], stored["created_at"]]
    assert all(stamp.endswith("Z") and "+" not in stamp for stamp in stamps), stamps
