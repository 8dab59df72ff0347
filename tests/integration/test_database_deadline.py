"""No wait on PostgreSQL is unbounded: every connection carries TCP's own bounds, and a database
that stops answering without closing its connections (a stalling proxy in front of the real
server) is given up at the answer deadline, while a server that is there still cancels a slow
statement itself first."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError

from app.settings import Settings
from app.storage.database import (
    create_db_engine,
    current_budget,
    engine_capacity,
    spend_at_most,
)
from tests.e2e.servers import TcpProxy, with_port

NOT_HUNG_SECONDS = 20
"""How long a call may take before the test calls it hung: many times any deadline here."""


def _outcome(call: Callable[[], Any]) -> Any:
    """What `call` returned or raised, run in a thread so that a hang fails the test instead of
    stalling the run (the thread is released when the proxy closes its connections)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        future = pool.submit(call)
        error = future.exception(timeout=NOT_HUNG_SECONDS)
        return error if error is not None else future.result()
    finally:
        pool.shutdown(wait=False)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[TcpProxy]:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    yield proxy
    proxy.resume()
    proxy.stop()


@pytest.fixture
def stallable(postgres_url: str, proxy: TcpProxy) -> Iterator[Engine]:
    """An engine that reaches the database through `proxy`, with half a second of timeout."""
    url = with_port(postgres_url, proxy.port)
    engine = create_db_engine(Settings(database_url=url, db_timeout_seconds=0.5))
    yield engine
    engine.dispose()


def _select_one(engine: Engine) -> Any:
    with engine.connect() as connection:
        return connection.execute(text("SELECT 1")).scalar_one()


def _commit_one(engine: Engine, proxy: TcpProxy) -> Any:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        proxy.stall()
        connection.commit()
    return "committed"


def _disconnect(outcome: Any) -> tuple[type, bool, str]:
    assert isinstance(outcome, OperationalError), outcome
    return type(outcome), outcome.connection_invalidated, str(outcome.orig)


def test_postgresql_connections_carry_keepalives_and_a_user_timeout(postgres_url: str) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url, db_timeout_seconds=2))
    try:
        with engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            assert raw is not None
            with socket.socket(fileno=os.dup(raw.fileno())) as sock:
                options = {
                    "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                    "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                    "user_timeout_ms": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
                }
    finally:
        engine.dispose()
    assert options == {
        "keepalive": 1,
        "idle": 2,
        "interval": 2,
        "count": 3,
        "user_timeout_ms": 2500,
    }


def test_a_statement_the_database_never_answers_is_a_disconnect_at_the_deadline(
    stallable: Engine, proxy: TcpProxy
) -> None:
    assert _select_one(stallable) == 1  # a pooled connection, open through the proxy
    proxy.stall()
    assert _disconnect(_outcome(lambda: _select_one(stallable))) == (
        OperationalError,
        True,
        "the database did not answer within 1.0 s",
    )
    proxy.resume()
    assert _outcome(lambda: _select_one(stallable)) == 1  # the pool starts afresh


def test_a_commit_the_database_never_answers_is_a_disconnect_at_the_deadline(
    stallable: Engine, proxy: TcpProxy
) -> None:
    assert _disconnect(_outcome(lambda: _commit_one(stallable, proxy))) == (
        OperationalError,
        True,
        "the database did not answer within 1.0 s",
    )


def test_a_new_connection_to_a_database_that_never_answers_times_out(
    stallable: Engine, proxy: TcpProxy
) -> None:
    proxy.stall()
    outcome = _outcome(lambda: _select_one(stallable))
    assert isinstance(outcome, OperationalError), outcome
    assert "timeout" in str(outcome.orig)


def test_a_slow_statement_is_cancelled_by_the_server_and_its_connection_kept(
    stallable: Engine,
) -> None:
    with stallable.connect() as connection:
        outcome = _outcome(lambda: connection.execute(text("SELECT pg_sleep(3)")))
        assert isinstance(outcome, OperationalError), outcome
        assert (outcome.connection_invalidated, type(outcome.orig).__name__) == (
            False,
            "QueryCanceled",
        )
        connection.rollback()
        assert connection.execute(text("SELECT 2")).scalar_one() == 2


# A request's waits on the database draw on one budget (`spend_at_most`, set per request by
# the API): what one step waited, the next may not wait again.


def _with_budget(seconds: float, *, spent: float, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call`, run with a wait budget of `seconds` of which `spent` is already gone (as by the
    earlier steps of a request)."""

    def run() -> Any:
        spend_at_most(seconds)
        budget = current_budget()
        assert budget is not None
        budget.spent = spent
        return call()

    return run


def test_a_statement_waits_only_what_is_left_of_the_requests_budget(
    stallable: Engine, proxy: TcpProxy
) -> None:
    assert _select_one(stallable) == 1
    proxy.stall()
    outcome = _outcome(_with_budget(1.0, spent=0.75, call=lambda: _select_one(stallable)))
    assert _disconnect(outcome) == (
        OperationalError,
        True,
        "the database did not answer within 0.25 s",
    )


def _checkout_wait(
    engine: Engine, settings: Settings, budget_seconds: float, *, spent: float
) -> float:
    """How long a checkout from `engine`, made with `settings`, its pool and overflow all out
    (`engine_capacity`), waited before giving up, in a request with `budget_seconds` of which
    `spent` are gone."""
    waited: list[float] = []

    def checkout() -> Any:
        try:
            return _select_one(engine)
        finally:
            budget = current_budget()
            assert budget is not None
            waited.append(budget.spent - spent)

    with ExitStack() as held:
        for _ in range(engine_capacity(settings)):
            held.enter_context(engine.connect())
        outcome = _outcome(_with_budget(budget_seconds, spent=spent, call=checkout))
    assert isinstance(outcome, SQLAlchemyTimeoutError), outcome
    return waited[0]


def test_a_checkout_waits_only_what_is_left_of_the_requests_budget(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, db_pool_size=1)
    engine = create_db_engine(settings)
    try:
        # 0.3 s left of the budget, against the pool's own 5 s.
        assert 0.3 <= _checkout_wait(engine, settings, 1.0, spent=0.7) < 5
    finally:
        engine.dispose()


def test_a_pool_recreated_within_a_request_keeps_its_own_timeout(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, db_pool_size=1, db_timeout_seconds=1)
    engine = create_db_engine(settings)
    try:
        # What SQLAlchemy does after a disconnect, within a request: a new pool. It must not
        # take that request's 0.1 s left for its own timeout.
        _outcome(_with_budget(0.1, spent=0.0, call=engine.dispose))
        assert _checkout_wait(engine, settings, 9.0, spent=0.0) >= 1
    finally:
        engine.dispose()


def test_a_new_connection_is_not_begun_with_less_than_libpqs_least_left(
    postgres_url: str,
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url))
    try:
        outcome = _outcome(_with_budget(5.5, spent=4.0, call=lambda: _select_one(engine)))
        assert isinstance(outcome, OperationalError), outcome
        assert str(outcome.orig) == (
            "1.50 s of the request's wait on the database is left: too little to open a "
            "connection (libpq takes up to 2)"
        )
        # With enough left, or nothing spent yet, it connects.
        assert _outcome(_with_budget(5.5, spent=3.0, call=lambda: _select_one(engine))) == 1
    finally:
        engine.dispose()
