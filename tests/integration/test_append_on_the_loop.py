"""The append's one statement run on the event loop (`appends.append_on_the_loop`, on a
`LoopPool` connection), on real PostgreSQL: it writes what the worker thread's way writes,
leaves replays, the locked way and a busy pool to that way, and fails as the engine's
connections fail — a cancel keeps the connection, a database gone quiet is a disconnect at the
deadline, a disconnect replaces the pool's dead connections — with no worker thread for a
small batch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import psycopg
import pytest
from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app.contract.sessions import AppendRequest
from app.domain.errors import SequenceConflict
from app.settings import Settings
from app.storage import appends, fact_log
from app.storage.database import create_db_engine, create_session_factory, spend_at_most
from app.storage.loop_pool import CHECKOUT_SECONDS, LoopPool
from app.storage.tables import SessionRow
from app.usecases.append import LOOP_BODY_BYTES, append_without_a_thread
from tests.builders import user_msg
from tests.e2e.servers import TcpProxy, with_port
from tests.integration.storage import facts_of, new_session, storage_tenant

T = TypeVar("T")


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = create_db_engine(Settings(database_url=postgres_url))
    yield engine
    engine.dispose()


def _on_a_loop(
    engine: Engine,
    settings: Settings,
    work: Callable[[LoopPool], Awaitable[T]],
    *,
    checkout_seconds: float = 5,
) -> T:
    """`work(pool)` on an event loop of its own, with an open `LoopPool` of `engine`, under
    a request's wait budget as the API gives one. The pool waits `checkout_seconds` for a
    connection: by default longer than the service's, so that one being replaced is waited for
    on a busy machine."""

    async def run() -> T:
        pool = LoopPool(engine, settings, checkout_seconds=checkout_seconds)
        await pool.open(wait=True)
        try:
            spend_at_most(settings.db_timeout_seconds + 0.5)
            with anyio.fail_after(20):  # a guard against a hang, not a measurement
                return await work(pool)
        finally:
            await pool.close()

    return anyio.run(run)


async def _outcome(call: Awaitable[T]) -> T | Exception:
    try:
        return await call
    except Exception as error:  # handed to the test
        return error


def _append(
    pool: LoopPool,
    tenant_id: int,
    session_id: str,
    items: list[dict[str, Any]],
    *,
    key: str | None = None,
    expected_last_seq: int | None = None,
) -> Awaitable[appends.SessionAppend | None]:
    batch = appends.SessionBatch(
        tenant_id=tenant_id,
        session_id=session_id,
        facts_for=facts_of(items),
        encoding_guess="o200k_base",
        unit=None,
        phase=None,
        idempotency_key=key,
        expected_last_seq=expected_last_seq,
        grade=False,
        recorded_at=datetime.now(UTC),
    )
    return appends.append_on_the_loop(pool, batch)


def _written(timeline: int, first_seq: int, *items: dict[str, Any]) -> fact_log.AppendResult:
    """`items` as written from `first_seq` on, on `timeline`."""
    facts = facts_of(list(items))("o200k_base")
    return fact_log.AppendResult.written(first_seq, facts, timeline=timeline)


def _logged(engine: Engine, session_pk: int) -> list[tuple[int, Any, str | None]]:
    with create_session_factory(engine)() as db:
        facts = fact_log.read_facts(db, session_id=session_pk)
    return [(fact.seq, fact.item, fact.idempotency_key) for fact in facts]


def test_the_loop_writes_what_the_threads_way_writes_and_leaves_it_replays_and_conflicts(
    engine: Engine, postgres_url: str, session_id: str, postgres_timeline: int
) -> None:
    settings = Settings(database_url=postgres_url)
    session_pk = new_session(engine, session_id)
    tenant_id = storage_tenant(engine)

    async def work(pool: LoopPool) -> list[Any]:
        first = await _append(pool, tenant_id, session_id, [user_msg("one")], key="k1")
        second = await _append(
            pool, tenant_id, session_id, [user_msg("two"), user_msg("three")], expected_last_seq=1
        )
        replay = await _append(pool, tenant_id, session_id, [user_msg("one")], key="k1")
        conflict = await _outcome(
            _append(pool, tenant_id, session_id, [user_msg("late")], expected_last_seq=1)
        )
        missing = await _outcome(_append(pool, tenant_id, "no-such-session", [user_msg("x")]))
        return [first, second, replay, conflict, missing]

    first, second, replay, conflict, missing = _on_a_loop(engine, settings, work)

    assert first == appends.SessionAppend(
        _written(postgres_timeline, 1, user_msg("one")), session_pk, None, None
    )
    assert second == appends.SessionAppend(
        _written(postgres_timeline, 2, user_msg("two"), user_msg("three")), session_pk, None, None
    )
    assert replay is None  # the threads' way replays it
    assert isinstance(conflict, SequenceConflict)
    assert conflict.details == {"expected": 1, "actual": 3}
    assert type(missing).__name__ == "NotFound"
    assert _logged(engine, session_pk) == [
        (1, user_msg("one"), "k1"),
        (2, user_msg("two"), None),
        (3, user_msg("three"), None),
    ]


def test_a_small_batch_needs_no_worker_thread_and_a_replay_takes_one(
    engine: Engine, postgres_url: str, session_id: str
) -> None:
    """Every worker thread is held while the small batch is appended: it could not finish if it
    needed one. The replay of its key then needs one (the threads' way replays)."""
    settings = Settings(database_url=postgres_url)
    session_pk = new_session(engine, session_id)
    tenant_id = storage_tenant(engine)
    factory = create_session_factory(engine)
    body = AppendRequest.model_validate({"items": [user_msg("small")], "idempotency_key": "s"})

    async def append(pool: LoopPool) -> Any:
        return await append_without_a_thread(
            pool,
            factory,
            tenant_id=tenant_id,
            session_id=session_id,
            body=body,
            body_bytes=LOOP_BODY_BYTES,
            settings=settings,
            now=datetime.now(UTC),
        )

    async def work(pool: LoopPool) -> list[Any]:
        limiter = anyio.to_thread.current_default_thread_limiter()
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for holder in holders:
            await limiter.acquire_on_behalf_of(holder)
        written = await append(pool)
        for holder in holders:
            limiter.release_on_behalf_of(holder)
        return [written, await append(pool)]

    written, replayed = _on_a_loop(engine, settings, work)

    assert (written.replayed, written.answer.first_seq, written.answer.last_seq) == (False, 1, 1)
    assert (replayed.replayed, replayed.answer) == (True, written.answer)
    assert _logged(engine, session_pk) == [(1, user_msg("small"), "s")]


def test_a_batch_that_finds_the_loops_connections_all_in_use_takes_a_worker_thread(
    postgres_url: str, session_id: str
) -> None:
    """The loop's one connection is held throughout: the append still answers, written."""
    settings = Settings(database_url=postgres_url, db_pool_size=1)
    engine = create_db_engine(settings)
    session_pk = new_session(engine, session_id)
    tenant_id = storage_tenant(engine)
    body = AppendRequest.model_validate({"items": [user_msg("busy")]})

    async def work(pool: LoopPool) -> list[Any]:
        async with pool.connection("SELECT 1") as held:
            refused = await _append(pool, tenant_id, session_id, [user_msg("not sent")])
            appended = await append_without_a_thread(
                pool,
                create_session_factory(engine),
                tenant_id=tenant_id,
                session_id=session_id,
                body=body,
                body_bytes=0,
                settings=settings,
                now=datetime.now(UTC),
            )
            still_held = not held.closed
        return [refused, appended, still_held]

    refused, appended, still_held = _on_a_loop(
        engine, settings, work, checkout_seconds=CHECKOUT_SECONDS
    )
    logged = _logged(engine, session_pk)
    engine.dispose()

    assert refused is None  # nothing sent: the threads' way is to take it
    assert (appended.replayed, appended.answer.first_seq, appended.answer.last_seq) == (
        False,
        1,
        1,
    )
    assert still_held
    assert logged == [(1, user_msg("busy"), None)]


def test_an_append_cancelled_by_the_server_fails_as_sqlalchemy_and_keeps_its_connection(
    postgres_url: str, session_id: str, postgres_timeline: int
) -> None:
    settings = Settings(database_url=postgres_url, db_timeout_seconds=0.5, db_pool_size=1)
    engine = create_db_engine(settings)
    session_pk = new_session(engine, session_id)
    tenant_id = storage_tenant(engine)

    async def work(pool: LoopPool) -> list[Any]:
        with create_session_factory(engine)() as holder:
            locked = select(SessionRow.id).where(SessionRow.id == session_pk).with_for_update()
            await anyio.to_thread.run_sync(holder.execute, locked)
            outcome = await _outcome(_append(pool, tenant_id, session_id, [user_msg("waits")]))
            await anyio.to_thread.run_sync(holder.rollback)
        async with pool.connection("SELECT pg_backend_pid()") as connection:
            backend = connection.info.backend_pid
        after = await _append(pool, tenant_id, session_id, [user_msg("after")])
        async with pool.connection("SELECT pg_backend_pid()") as connection:
            still = connection.info.backend_pid
        return [outcome, after, backend, still]

    outcome, after, backend, still = _on_a_loop(engine, settings, work)
    engine.dispose()

    assert isinstance(outcome, OperationalError), outcome
    assert (outcome.connection_invalidated, type(outcome.orig)) == (
        False,
        psycopg.errors.QueryCanceled,
    )
    assert after.result == _written(postgres_timeline, 1, user_msg("after"))
    assert backend == still  # the one connection the pool holds, kept


def test_an_append_to_a_stalled_database_is_a_disconnect_at_the_deadline(
    postgres_url: str, session_id: str, postgres_timeline: int
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    settings = Settings(database_url=with_port(postgres_url, proxy.port), db_timeout_seconds=0.5)
    engine = create_db_engine(settings)

    async def work(pool: LoopPool) -> list[Any]:
        before = await _append(pool, tenant_id, session_id, [user_msg("before")])
        spend_at_most(settings.db_timeout_seconds + 0.5)  # each append a request of its own
        proxy.stall()
        stalled = await _outcome(_append(pool, tenant_id, session_id, [user_msg("stalled")]))
        proxy.resume()
        spend_at_most(settings.db_timeout_seconds + 0.5)
        after = await _outcome(_append(pool, tenant_id, session_id, [user_msg("after")]))
        return [before, stalled, after]

    try:
        new_session(engine, session_id)
        tenant_id = storage_tenant(engine)
        before, stalled, after = _on_a_loop(engine, settings, work)
    finally:
        proxy.resume()
        proxy.stop()
        engine.dispose()

    assert before.result == _written(postgres_timeline, 1, user_msg("before"))
    assert isinstance(stalled, OperationalError), stalled
    assert (stalled.connection_invalidated, str(stalled.orig)) == (
        True,
        "the database did not answer within 1.0 s",
    )
    # The stalled statement may have committed before the stall: the next seq is 2 or 3.
    assert isinstance(after, appends.SessionAppend), after
    assert after.result.facts[0].seq in (2, 3)


def test_a_disconnect_found_by_an_append_replaces_the_pools_dead_connections(
    postgres_url: str, session_id: str, postgres_timeline: int
) -> None:
    settings = Settings(database_url=postgres_url, db_pool_size=4)  # two on the loop
    engine = create_db_engine(settings)
    new_session(engine, session_id)
    tenant_id = storage_tenant(engine)
    admin_url = make_url(postgres_url).set(drivername="postgresql")

    async def backend_pids(pool: LoopPool) -> list[int]:
        async with (
            pool.connection("SELECT 1") as first,
            pool.connection("SELECT 1") as second,
        ):
            return [first.info.backend_pid, second.info.backend_pid]

    async def work(pool: LoopPool) -> list[Any]:
        backends = await backend_pids(pool)
        async with await psycopg.AsyncConnection.connect(
            admin_url.render_as_string(hide_password=False), autocommit=True
        ) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) pid", [backends]
            )
        refused = await _outcome(_append(pool, tenant_id, session_id, [user_msg("dead")]))
        # Without the pool's check, the other dead connection would fail these.
        appended = [
            await _append(pool, tenant_id, session_id, [user_msg(f"new {n}")]) for n in (1, 2)
        ]
        return [refused, appended, backends, await backend_pids(pool)]

    refused, appended, backends, replaced = _on_a_loop(engine, settings, work)
    engine.dispose()

    assert isinstance(refused, OperationalError), refused
    assert refused.connection_invalidated
    assert [append.result for append in appended] == [
        _written(postgres_timeline, 1, user_msg("new 1")),
        _written(postgres_timeline, 2, user_msg("new 2")),
    ]
    assert not set(replaced) & set(backends)
