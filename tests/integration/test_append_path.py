"""A client's batch appended in one statement (`app.storage.appends`), on real PostgreSQL: the
guarantees of the locked append kept under races the one statement meets — a batch committed
between its snapshot and its row lock, appenders all at once, the encoding guessed wrong — and
the grading it asks for found in the database, whichever process made the assembly; the
statement run on a pooled connection of its own failing as SQLAlchemy fails (a cancel keeps the
connection, a disconnect replaces the pool's), or run in the caller's transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from app.clock import system_clock
from app.contract.assembly import AssembleRequest
from app.contract.sessions import AppendRequest
from app.domain.errors import SequenceConflict
from app.domain.facts import item_fact
from app.settings import Settings
from app.storage import appends, fact_log, session_rows, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from app.storage.tables import SessionRow
from app.tokens import token_counter
from app.usecases.append import append
from app.usecases.assemble import assemble, stored_assembly
from app.usecases.plan_record import ReceivedRequest
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.e2e.servers import TcpProxy, with_port
from tests.integration.storage import (
    append_items,
    facts_of,
    new_session,
    storage_tenant,
)

TENANT = "storage-tests"


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = create_db_engine(Settings(database_url=postgres_url))
    yield engine
    engine.dispose()


def _append(
    engine: Engine,
    session_id: str,
    items: list[dict[str, Any]],
    *,
    key: str | None = None,
    expected_last_seq: int | None = None,
    guess: str = "o200k_base",
    seen: list[str] | None = None,
    tenant_id: int | None = None,
) -> appends.SessionAppend:
    """One append the way the API makes it: its own database session, committed (for the
    tenant `tenant_id`, else the tests' own, looked up first)."""
    tenant_id = storage_tenant(engine) if tenant_id is None else tenant_id
    with create_session_factory(engine)() as db:
        batch = appends.SessionBatch(
            tenant_id=tenant_id,
            session_id=session_id,
            facts_for=facts_of(items, seen),
            encoding_guess=guess,
            unit=None,
            phase=None,
            idempotency_key=key,
            expected_last_seq=expected_last_seq,
            grade=False,
            recorded_at=datetime.now(UTC),
        )
        appended = appends.append_to_session(db, batch)
        db.commit()
        return appended


def _logged(engine: Engine, session_pk: int) -> list[tuple[int, Any, str | None]]:
    with create_session_factory(engine)() as db:
        facts = fact_log.read_facts(db, session_id=session_pk)
        last_seq = db.scalar(select(SessionRow.last_seq).where(SessionRow.id == session_pk))
    assert last_seq == (facts[-1].seq if facts else 0)
    return [(fact.seq, fact.item, fact.idempotency_key) for fact in facts]


def _behind_a_held_lock(
    engine: Engine, session_pk: int, held: list[dict[str, Any]], *, key: str | None, run: Any
) -> Any:
    """`run()` started while another transaction holds the session's row lock and has appended
    `held` under `key`; that transaction commits once `run`'s statement waits for the lock
    (its snapshot taken without `held`). Returns what `run` returned or raised."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = run()
        except Exception as exc:  # handed to the test
            outcome["error"] = exc

    with create_session_factory(engine)() as holder:
        append_items(holder, session_pk, held, idempotency_key=key)
        waiter = threading.Thread(target=target)
        waiter.start()
        # Autocommit: a transaction would keep reading its first snapshot of the activity.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as watcher:
            waiting = text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND query LIKE 'WITH named AS%'"
            )
            deadline = time.monotonic() + 30  # a guard against a hang, not a measurement
            while watcher.execute(waiting).scalar() == 0:
                assert time.monotonic() < deadline, "the append never waited for the lock"
                time.sleep(0.005)
        holder.commit()
        waiter.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_keyed_batch_committed_while_the_same_key_waited_is_replayed_not_written_twice(
    engine: Engine, session_id: str, postgres_timeline: int
) -> None:
    session_pk = new_session(engine, session_id)
    _append(engine, session_id, [user_msg("before")])
    batch = [user_msg("turn 2"), assistant_msg("done")]

    def same_key_again() -> appends.SessionAppend:
        return _append(engine, session_id, batch, key="turn-2")

    appended = _behind_a_held_lock(engine, session_pk, batch, key="turn-2", run=same_key_again)

    # As first written (the holder counts a token an item).
    assert appended.result == fact_log.AppendResult(
        facts=(
            fact_log.AppendedFact(2, "message", 1),
            fact_log.AppendedFact(3, "message", 1),
        ),
        replayed=True,
        timeline=postgres_timeline,
    )
    assert _logged(engine, session_pk) == [
        (1, user_msg("before"), None),
        (2, batch[0], "turn-2"),
        (3, batch[1], "turn-2"),
    ]


def test_an_expected_last_seq_overtaken_while_waiting_is_refused_and_writes_nothing(
    engine: Engine, session_id: str
) -> None:
    session_pk = new_session(engine, session_id)
    _append(engine, session_id, [user_msg("first")])

    def expecting_one() -> appends.SessionAppend:
        return _append(engine, session_id, [user_msg("late")], expected_last_seq=1)

    with pytest.raises(SequenceConflict) as refused:
        _behind_a_held_lock(
            engine, session_pk, [user_msg("overtaking")], key=None, run=expecting_one
        )

    assert refused.value.details == {"expected": 1, "actual": 2}
    assert _logged(engine, session_pk) == [
        (1, user_msg("first"), None),
        (2, user_msg("overtaking"), None),
    ]


def test_an_unkeyed_batch_waiting_for_the_lock_goes_after_the_one_holding_it(
    engine: Engine, session_id: str, postgres_timeline: int
) -> None:
    session_pk = new_session(engine, session_id)

    def unkeyed() -> appends.SessionAppend:
        return _append(engine, session_id, [user_msg("second"), user_msg("third")])

    appended = _behind_a_held_lock(engine, session_pk, [user_msg("first")], key=None, run=unkeyed)

    assert appended.result == fact_log.AppendResult(
        facts=(
            fact_log.AppendedFact(2, "message", 1),
            fact_log.AppendedFact(3, "message", 1),
        ),
        replayed=False,
        timeline=postgres_timeline,
    )
    assert [seq for seq, _, _ in _logged(engine, session_pk)] == [1, 2, 3]


def test_appenders_all_at_once_get_dense_seqs_and_one_write_per_key(
    engine: Engine, session_id: str
) -> None:
    session_pk = new_session(engine, session_id)
    writers, rounds = 6, 10
    start = threading.Barrier(writers)
    results: dict[tuple[int, int], appends.SessionAppend] = {}

    def write(writer: int) -> None:
        start.wait()
        for n in range(rounds):
            # Every writer sends round n's keyed batch (retries of one client, say) and one
            # batch of its own; the locked way (another writer's goal, say) now and then too.
            results[writer, n] = _append(engine, session_id, [user_msg(f"k{n}")], key=f"k{n}")
            _append(engine, session_id, [user_msg(f"{writer}-{n}"), user_msg(f"{writer}-{n}+")])
            if n % 3 == writer % 3:
                with create_session_factory(engine)() as db:
                    append_items(db, session_pk, [user_msg(f"locked {writer}-{n}")])
                    db.commit()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    logged = _logged(engine, session_pk)
    keyed = {key: seq for seq, _, key in logged if key is not None}
    texts = sorted(item["content"][0]["text"] for _, item, _ in logged)
    assert [seq for seq, _, _ in logged] == list(range(1, len(logged) + 1))
    assert texts == sorted(
        [f"k{n}" for n in range(rounds)]
        + [f"{w}-{n}{end}" for w in range(writers) for n in range(rounds) for end in ("", "+")]
        + [f"locked {w}-{n}" for w in range(writers) for n in range(rounds) if n % 3 == w % 3]
    )
    assert {(n, result.result.facts[0].seq) for (_, n), result in results.items()} == {
        (n, keyed[f"k{n}"]) for n in range(rounds)
    }
    assert sorted(not result.result.replayed for result in results.values()) == (
        [False] * (writers - 1) * rounds + [True] * rounds
    )


def test_a_wrong_encoding_guess_counts_again_in_the_sessions_own_once_per_process(
    engine: Engine, session_id: str
) -> None:
    new_session(engine, session_id)  # o200k_base
    first: list[str] = []
    second: list[str] = []
    item = user_msg("東京都の天気は晴れです")

    guessed = _append(engine, session_id, [item], guess="cl100k_base", seen=first)
    known = _append(engine, session_id, [item], guess="cl100k_base", seen=second)

    own_count = item_fact(item, provenance={}, count_tokens=token_counter("o200k_base")).tokens
    assert (
        own_count
        != item_fact(item, provenance={}, count_tokens=token_counter("cl100k_base")).tokens
    )
    assert (first, second) == (["cl100k_base", "o200k_base"], ["o200k_base"])
    assert [guessed.result.facts, known.result.facts] == [
        (fact_log.AppendedFact(1, "message", own_count),),
        (fact_log.AppendedFact(2, "message", own_count),),
    ]


def test_a_model_output_grades_only_an_assembly_the_database_holds_still_ungraded(
    postgres_url: str,
) -> None:
    """The append asks the database, not this process, whether there is an assembly to grade:
    one made through another engine (another server process) is graded all the same."""
    settings = Settings(database_url=postgres_url)
    here, elsewhere = create_db_engine(settings), create_db_engine(settings)
    session_id = "graded-across-processes"
    with create_session_factory(here)() as db:
        tenant = tenant_rows.ensure_tenant(db, TENANT)
        session_rows.create_session(
            db,
            tenant_id=tenant,
            external_id=session_id,
            encoding="o200k_base",
            context_window=8_000,
            model=None,
            attributes={"metadata": {}, "hooks": {}},
            derive_id=str,
        )
        db.commit()

    def append_here(items: list[dict[str, Any]]) -> Any:
        with create_session_factory(here)() as db:
            return append(
                db,
                tenant_id=tenant,
                session_id=session_id,
                body=AppendRequest(items=items),
                settings=settings,
                now=datetime.now(UTC),
            )

    opening = append_here([user_msg("Find open_export."), tool_call("c1"), tool_output("c1", "")])
    never_assembled = append_here([assistant_msg("Looking for open_export.")])
    with create_session_factory(elsewhere)() as db:
        request = AssembleRequest(session_id=session_id)
        made = assemble(
            db,
            tenant_id=tenant,
            request=request,
            received=ReceivedRequest.of(request),
            settings=settings,
            now=system_clock(),
        )
        assert made.after_answer is not None
        made.after_answer()
    output = append_here([assistant_msg("open_export is in writer.py.")])
    assert output.after_answer is not None
    output.after_answer()
    again = append_here([assistant_msg("Done with open_export.")])
    with create_session_factory(elsewhere)() as db:
        stored = stored_assembly(db, tenant_id=tenant, assembly_id=made.assembly_id)
    here.dispose()
    elsewhere.dispose()

    assert (opening.after_answer, never_assembled.after_answer, again.after_answer) == (
        None,
        None,
        None,
    )
    assert stored["grounding"] == {
        "needed": 1,
        "visible": 1,
        "recallable": 0,
        "neither": 0,
        "all_visible": True,
        "misses_by_form": {},
        "missed": [],
        "ungraded": 0,
    }


def _outcome(call: Callable[[], Any]) -> Any:
    """What `call` returned or raised, run in a thread so that a hang fails the test instead of
    stalling the run."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        future = pool.submit(call)
        error = future.exception(timeout=20)  # a guard against a hang, not a measurement
        return error if error is not None else future.result()
    finally:
        pool.shutdown(wait=False)


def _written(first_seq: int, *items: dict[str, Any]) -> tuple[fact_log.AppendedFact, ...]:
    """`items` as written from `first_seq` on, counted in the sessions' encoding."""
    facts = facts_of(list(items))("o200k_base")
    return fact_log.AppendResult.written(first_seq, facts, timeline=None).facts


def _driver(pooled: PoolProxiedConnection) -> psycopg.Connection[Any]:
    connection = pooled.driver_connection
    assert isinstance(connection, psycopg.Connection)
    return connection


def _autocommits(engine: Engine) -> list[bool]:
    """Whether each connection the pool holds is in autocommit."""
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    held = [engine.raw_connection() for _ in range(pool.checkedin())]
    autocommits = [_driver(pooled).autocommit for pooled in held]
    for pooled in held:
        pooled.close()
    return autocommits


def test_an_append_cancelled_by_the_server_fails_as_sqlalchemy_and_keeps_its_connection(
    postgres_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url, db_timeout_seconds=0.5))
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as holder:
        holder.execute(select(SessionRow.id).where(SessionRow.id == session_pk).with_for_update())
        outcome = _outcome(lambda: _append(engine, session_id, [user_msg("waits")]))
    after = _append(engine, session_id, [user_msg("after")])
    autocommits = _autocommits(engine)
    engine.dispose()

    assert isinstance(outcome, OperationalError), outcome
    assert (outcome.connection_invalidated, type(outcome.orig)) == (
        False,
        psycopg.errors.QueryCanceled,
    )
    assert after.result.facts == _written(1, user_msg("after"))
    assert autocommits == [False] * len(autocommits)


def test_an_append_to_a_stalled_database_is_a_disconnect_at_the_deadline(
    postgres_url: str, session_id: str
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    settings = Settings(database_url=with_port(postgres_url, proxy.port), db_timeout_seconds=0.5)
    engine = create_db_engine(settings)
    try:
        new_session(engine, session_id)
        _append(engine, session_id, [user_msg("before")])
        proxy.stall()
        outcome = _outcome(lambda: _append(engine, session_id, [user_msg("stalled")]))
        proxy.resume()
        after = _outcome(lambda: _append(engine, session_id, [user_msg("after")]))
    finally:
        proxy.resume()
        proxy.stop()
        engine.dispose()

    assert isinstance(outcome, OperationalError), outcome
    assert (outcome.connection_invalidated, str(outcome.orig)) == (
        True,
        "the database did not answer within 1.0 s",
    )
    # The stalled statement may have committed before the stall: the next seq is 2 or 3.
    assert isinstance(after, appends.SessionAppend), after
    assert after.result.facts[0].seq in (2, 3)


def test_a_disconnect_found_by_an_append_replaces_the_pools_older_connections(
    postgres_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url, db_pool_size=2))
    new_session(engine, session_id)
    tenant_id = storage_tenant(engine)
    first, second = engine.raw_connection(), engine.raw_connection()
    backends = [_driver(first).info.backend_pid, _driver(second).info.backend_pid]
    first.close()
    second.close()
    conninfo = make_url(postgres_url).set(drivername="postgresql")
    with psycopg.connect(conninfo.render_as_string(hide_password=False), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) pid", [backends])
    dead = [user_msg("on a dead connection")]
    refused = _outcome(lambda: _append(engine, session_id, dead, tenant_id=tenant_id))
    with create_session_factory(engine)() as db:
        # Without the pool's invalidation, the other dead connection would fail this.
        last_seq = db.scalar(
            select(SessionRow.last_seq).where(SessionRow.external_id == session_id)
        )
    appended = _append(engine, session_id, [user_msg("on a new connection")])
    engine.dispose()

    assert isinstance(refused, OperationalError), refused
    assert refused.connection_invalidated
    assert last_seq == 0
    assert appended.result.facts == _written(1, user_msg("on a new connection"))


def test_an_append_in_the_callers_transaction_is_undone_with_it(
    engine: Engine, session_id: str, postgres_timeline: int
) -> None:
    session_pk = new_session(engine, session_id)
    with create_session_factory(engine)() as db:
        db.execute(select(SessionRow.id).where(SessionRow.id == session_pk))  # begins
        batch = appends.SessionBatch(
            tenant_id=storage_tenant(engine),
            session_id=session_id,
            facts_for=facts_of([user_msg("undone")]),
            encoding_guess="o200k_base",
            unit=None,
            phase=None,
            idempotency_key="undone",
            expected_last_seq=0,
            grade=False,
            recorded_at=datetime.now(UTC),
        )
        appended = appends.append_to_session(db, batch)
        db.rollback()
    again = _append(engine, session_id, [user_msg("kept")], key="undone")

    assert appended.result.facts == _written(1, user_msg("undone"))
    assert again.result == fact_log.AppendResult(
        _written(1, user_msg("kept")), replayed=False, timeline=postgres_timeline
    )
    assert _logged(engine, session_pk) == [(1, user_msg("kept"), "undone")]
