"""Engine construction, migrations and readiness.

SQLite transactions start with `BEGIN IMMEDIATE` so that two appenders serialise on the
write lock up front instead of failing on lock upgrade; PostgreSQL serialises appenders
with a row lock on the session (see `fact_log.append_facts`).

A PostgreSQL connection whose `info` has `HOLDS_SESSION_LOCKS` set releases every
session-level advisory lock it holds when it goes back to the pool, whichever way it goes
back (a failure to release invalidates it: closed, the server releases them).

No wait on PostgreSQL is unbounded (T is `CTX_DB_TIMEOUT_SECONDS`): a checkout waits for a
pooled connection at most T, a new connection is made within T (at least 2 s, libpq's least),
the server cancels any statement running longer than T, and every answer the client waits for
(a statement's, a commit's, a rollback's) comes within `answer_deadline` (T + 0.5 s) or the
connection is closed. A request's waits together are bounded too: each draws on the request's
`WaitBudget` of `answer_deadline` (`spend_at_most`), so a request that meets a database gone
quiet answers 503 after one deadline in all, not one per step (a connection is not begun with
less than libpq's 2 s left; a budget under 2 s still allows that one). So a database that stops
answering without closing its connections (a hung host, a wedged proxy) is a disconnect:
SQLAlchemy raises `OperationalError` (a 503 at the API) and replaces every connection the pool
holds. Pinned by `tests/integration/test_database_deadline.py` and `tests/e2e/test_faults.py`.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg.abc import RV, PQGen
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from app.domain.ids import session_key
from app.domain.json_encoding import decode_json, encode_json
from app.settings import Settings
from app.storage.caches import CACHES, ProcessCaches

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
HOLDS_SESSION_LOCKS = "holds_session_locks"
_LEAST_WAIT = 0.001
LEAST_CONNECT_SECONDS = 2
"""libpq's least connect timeout: shorter ones are raised to it."""
ANSWER_GRACE_SECONDS = 0.5
"""How long past the statement timeout the client still waits for an answer: a server that is
there cancels the statement itself first, and its connection stays usable."""


def dump_json(value: Any) -> str:
    """The JSON columns' serializer (SQLAlchemy wants text)."""
    return encode_json(value).decode()


def answer_deadline(settings: Settings) -> float:
    """Seconds the service waits for any one answer of the database."""
    return settings.db_timeout_seconds + ANSWER_GRACE_SECONDS


class WaitBudget:
    """What one request may still spend waiting on the database, in all: for a pooled
    connection, for a new one, and for every answer. Set per request (`spend_at_most`); the
    waits below draw on it, so a request that meets a database gone quiet waits one database
    timeout in all, not one per step. Not thread-safe: a request's database work is
    sequential."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self._since: float | None = None

    def left(self) -> float:
        """What is left, the wait under way counted."""
        ongoing = 0.0 if self._since is None else time.monotonic() - self._since
        return max(0.0, self.seconds - self.spent - ongoing)

    @contextmanager
    def drawing(self) -> Iterator[None]:
        """A wait that draws on the budget; a wait within a wait (the pool's checkout opening
        a connection, or trying again) is the outer one's."""
        if self._since is not None:
            yield
            return
        self._since = time.monotonic()
        try:
            yield
        finally:
            self.spent += time.monotonic() - self._since
            self._since = None


_budget: ContextVar[WaitBudget | None] = ContextVar("contextd_db_wait_budget", default=None)


def spend_at_most(seconds: float) -> None:
    """Give the current request (its context, and the worker threads it runs work in) a wait
    budget of `seconds` on the database."""
    _budget.set(WaitBudget(seconds))


def current_budget() -> WaitBudget | None:
    """The current request's wait budget, if it has one."""
    return _budget.get()


def drawing() -> AbstractContextManager[None]:
    budget = _budget.get()
    return budget.drawing() if budget is not None else nullcontext()


def within_budget(seconds: float) -> float:
    """`seconds`, or less if the request's budget has less left."""
    budget = _budget.get()
    return seconds if budget is None else min(seconds, budget.left())


class BudgetedPool(QueuePool):
    """A queue pool whose checkout waits no longer than the request's wait budget allows (the
    configured pool timeout otherwise), and draws on it."""

    @property
    def _timeout(self) -> float:
        return within_budget(self._configured_timeout)

    @_timeout.setter
    def _timeout(self, value: float) -> None:
        self._configured_timeout = value

    def _do_get(self) -> ConnectionPoolEntry:
        with drawing():
            return super()._do_get()

    def recreate(self) -> QueuePool:
        # `recreate` passes on `_timeout`, which here is the budget of whoever asks.
        pool = super().recreate()
        pool._timeout = self._configured_timeout
        return pool


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection that gives up waiting for the server after `answer_within` seconds.

    psycopg runs every exchange with the server (execute, fetch, commit, rollback) through
    `wait`, so bounding it bounds them all, whatever the network does: a stalled connection's
    socket stays open and quiet, so neither the server's statement timeout (the statement
    never arrived) nor TCP (the bytes were acknowledged) would ever end the wait. A command
    left unanswered leaves the protocol mid-exchange, so the connection is closed: SQLAlchemy
    sees a disconnect.
    """

    answer_within: float | None = None
    host: tuple[str, str] | None = None
    preferred: PreferredHost | None = None
    """The engine's host order, told when this connection's host goes quiet."""

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        limit = answer_limit(self.answer_within, timeout)
        try:
            with drawing():
                return super().wait(gen, interval, limit)
        except psycopg.OperationalError as exc:
            if limit is None or not gave_up(self.pgconn):
                raise
            # The host left a statement unanswered for at least half the answer deadline (the
            # server's own statement timeout would have answered with an error before it); a
            # wait the request's budget cut shorter says nothing of the host.
            quiet = self.answer_within is not None and limit >= self.answer_within / 2
            if quiet and self.preferred is not None and self.host is not None:
                self.preferred.went_quiet(self.host)
            raise unanswered(limit) from exc


def answer_limit(answer_within: float | None, timeout: float | None) -> float | None:
    """How long a connection waits for the server's answer: `timeout` when psycopg gives one,
    else the connection's `answer_within`, cut to the request's wait budget."""
    limit = answer_within if timeout is None else timeout
    if limit is None:
        return None
    # A spent budget still lets the exchange start: it then gives up at once.
    return max(within_budget(limit), _LEAST_WAIT)


def gave_up(pgconn: PGconn) -> bool:
    """Whether a wait for an answer that failed left its exchange unfinished: the connection
    is then closed (what it would read next is unknown), and True."""
    if pgconn.transaction_status != TransactionStatus.ACTIVE:
        return False
    pgconn.finish()
    return True


def unanswered(limit: float) -> psycopg.OperationalError:
    return psycopg.OperationalError(f"the database did not answer within {round(limit, 2)} s")


READ_ONLY = "25006"
SERVER_GONE_ELSEWHERE = frozenset(
    {
        READ_ONLY,  # read_only_sql_transaction: a standby, a demoted primary, a read-only spell
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now: starting up, or shutting down
    }
)
"""SQLSTATEs after which no pooled connection is worth keeping: the host they reach cannot
take writes (or soon any statement), and after a failover the writable one is elsewhere. They
are answered 503 and every pooled connection is replaced, so the next ones reach whatever
host the URL names as writable (libpq's `target_session_attrs=read-write`) once there is one."""


def server_gone_elsewhere(error: BaseException | None) -> bool:
    """Whether the driver's `error` is one of `SERVER_GONE_ELSEWHERE`."""
    return getattr(error, "sqlstate", None) in SERVER_GONE_ELSEWHERE


class NotConnected(psycopg.OperationalError):
    """No connection was opened: nothing of the request reached the database."""


def nothing_sent(error: BaseException) -> bool:
    """Whether a failed request's database `error` (SQLAlchemy's, or the driver's) shows that no
    write of it can have been applied: no connection came (the pool's wait, or the connect,
    ran out) or the host refused writes (read-only). Any other failure of a write may have come
    after its commit was sent: that write is in doubt."""
    if isinstance(error, SQLAlchemyTimeout):
        return True
    cause = getattr(error, "orig", error)
    return isinstance(cause, NotConnected) or getattr(cause, "sqlstate", None) == READ_ONLY


def connection_capacity(settings: Settings) -> int:
    """The most connections one process holds at once: twice the pool size. On SQLite they are
    all the engine's (its pool, and as many again in overflow); on PostgreSQL the event loop's
    pool (`loop_pool_size`) takes its share out of the engine's overflow."""
    return 2 * settings.db_pool_size


def loop_pool_size(settings: Settings) -> int:
    """The connections of the event loop's pool on PostgreSQL (`app.storage.loop_pool`): half
    the pool size, rounded up. Each is held for one statement at a time."""
    return (settings.db_pool_size + 1) // 2


def engine_capacity(settings: Settings) -> int:
    """The most connections the engine ever has checked out at once (`connection_capacity`,
    less the event loop's on PostgreSQL)."""
    loop_share = 0 if settings.database_url.startswith("sqlite") else loop_pool_size(settings)
    return connection_capacity(settings) - loop_share


def create_db_engine(settings: Settings) -> Engine:
    url = settings.database_url
    json_options = {"json_serializer": dump_json, "json_deserializer": decode_json}
    pool_options = {
        "pool_size": settings.db_pool_size,
        "max_overflow": engine_capacity(settings) - settings.db_pool_size,
        "pool_timeout": settings.db_timeout_seconds,
    }
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": settings.db_timeout_seconds, "check_same_thread": False},
            # An in-memory database is one connection, shared: it has no pool to size.
            **({} if make_url(url).database in (None, "", ":memory:") else pool_options),
            **json_options,
        )
        _use_immediate_transactions(engine)
        return engine
    engine = create_engine(
        url,
        poolclass=BudgetedPool,
        **pool_options,
        # No pre-ping (it costs a round trip per request): a dropped connection fails one
        # request with 503, and SQLAlchemy then invalidates the whole pool, so the service
        # recovers by itself when the database returns.
        pool_pre_ping=False,
        pool_recycle=1800,
        **json_options,
        connect_args=connect_args(settings),
    )
    _answer_within(engine, answer_deadline(settings))
    _release_session_locks_on_return(engine)
    _replace_connections_of_a_host_gone_elsewhere(engine)
    return engine


def _replace_connections_of_a_host_gone_elsewhere(engine: Engine) -> None:
    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:
        if server_gone_elsewhere(context.original_exception):
            # As a disconnect: this connection is closed and the pool's older ones replaced.
            context.is_disconnect = True


def connect_args(settings: Settings) -> dict[str, Any]:
    """libpq's parameters: the timeouts, and TCP's own bounds for a database host that vanishes
    without a word (no reset): unacknowledged data is given up after the answer deadline
    (`tcp_user_timeout`), an idle connection after three unanswered keepalive probes."""
    timeout = settings.db_timeout_seconds
    probe_every = max(1, math.ceil(timeout))
    return {
        "connect_timeout": max(LEAST_CONNECT_SECONDS, math.ceil(timeout)),
        "options": f"-c statement_timeout={int(timeout * 1000)}",
        "keepalives": 1,
        "keepalives_idle": probe_every,
        "keepalives_interval": probe_every,
        "keepalives_count": 3,
        "tcp_user_timeout": int(answer_deadline(settings) * 1000),
    }


class PreferredHost:
    """The order in which a connection tries the hosts a URL names (libpq's multi-host form,
    with `target_session_attrs=read-write` for a primary with standbys): the host that took the
    last connection first, a host that left a statement unanswered last.

    libpq tries hosts in order, each up to the connect timeout: an old primary that hangs
    instead of refusing would take that long on every connection, and a request whose budget
    it took fails even when the next host answered. A host that went quiet on a statement is
    tried last from then on, and one that took a connection first, so a hanging host costs
    the service its connections in flight and at most one connection attempt."""

    def __init__(self) -> None:
        self.host: tuple[str, str] | None = None
        self.quiet: tuple[str, str] | None = None

    def first(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """`parameters` with their hosts in this order."""
        hosts = str(parameters.get("host") or "").split(",")
        if len(hosts) < 2 or (self.host is None and self.quiet is None):
            return parameters
        ports = str(parameters.get("port") or "").split(",")
        if len(ports) != len(hosts):
            ports = ports * len(hosts)
        pairs = list(zip(hosts, ports, strict=True))

        def rank(pair: tuple[str, str]) -> int:
            if self._is(pair, self.host):
                return 0
            return 2 if self._is(pair, self.quiet) else 1

        pairs.sort(key=rank)  # stable: the URL's order otherwise
        return {
            **parameters,
            "host": ",".join(host for host, _ in pairs),
            "port": ",".join(port for _, port in pairs),
        }

    @staticmethod
    def _is(pair: tuple[str, str], known: tuple[str, str] | None) -> bool:
        return known is not None and pair[0] == known[0] and pair[1] in (known[1], "")

    def took(self, host: tuple[str, str]) -> None:
        """`host` took a connection."""
        self.host = host
        if self.quiet == host:
            self.quiet = None

    def went_quiet(self, host: tuple[str, str]) -> None:
        """`host` left a statement unanswered."""
        self.quiet = host
        if self.host == host:
            self.host = None


def host_of(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> tuple[str, str]:
    """The host and port a connection reached."""
    return connection.info.host, str(connection.info.port)


_preferred_hosts: weakref.WeakKeyDictionary[Engine, PreferredHost] = weakref.WeakKeyDictionary()


def preferred_host(engine: Engine) -> PreferredHost:
    """The host order of `engine`'s connections, which the event loop's pool shares (both
    reach the same hosts): what one learns of a host, the other tries it by."""
    return _preferred_hosts.setdefault(engine, PreferredHost())


def _answer_within(engine: Engine, seconds: float) -> None:
    preferred = preferred_host(engine)

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # A pooled connection to a host that has since gone quiet would wait a whole answer
        # deadline on its first statement: replaced instead (SQLAlchemy checks out another).
        quiet = preferred.quiet
        if quiet is not None and getattr(dbapi_connection, "host", None) == quiet:
            raise DisconnectionError("the connection's host went quiet")

    @event.listens_for(engine, "do_connect")
    def _on_connect(
        _dialect: Any, _record: Any, cargs: tuple[Any, ...], cparams: dict[str, Any]
    ) -> DeadlineConnection:
        timeout = int(cparams.get("connect_timeout", LEAST_CONNECT_SECONDS))
        budget = _budget.get()
        if budget is not None:
            # libpq (and psycopg) wait at least 2 s for a connection whatever they are given:
            # a request whose budget held that much and has less left gives up instead.
            if budget.left() < LEAST_CONNECT_SECONDS <= budget.seconds:
                raise NotConnected(
                    f"{budget.left():.2f} s of the request's wait on the database is left: "
                    f"too little to open a connection (libpq takes up to {LEAST_CONNECT_SECONDS})"
                )
            timeout = max(LEAST_CONNECT_SECONDS, min(timeout, math.ceil(budget.left())))
        with drawing():
            try:
                connection = DeadlineConnection.connect(
                    *cargs, **{**preferred.first(cparams), "connect_timeout": timeout}
                )
            except psycopg.OperationalError as exc:
                raise NotConnected(str(exc)) from exc
        connection.host = host_of(connection)
        connection.preferred = preferred
        preferred.took(connection.host)
        connection.answer_within = seconds
        return connection


def _release_session_locks_on_return(engine: Engine) -> None:
    @event.listens_for(engine, "reset")
    def _on_reset(dbapi_connection: Any, record: Any, _state: Any) -> None:
        if record.info.pop(HOLDS_SESSION_LOCKS, False):
            dbapi_connection.rollback()  # an aborted transaction would refuse the statement
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT pg_advisory_unlock_all()")
            cursor.close()


def _use_immediate_transactions(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        # What migration 20261205_0011 defines in PostgreSQL, for the lookup of a session by
        # name (`session_rows.IS_NAMED_SESSION`). SQLite is never sharded: it always looks among
        # sessions created before keys were derived too.
        dbapi_connection.create_function("contextd_session_key", 2, session_key, deterministic=True)
        dbapi_connection.create_function(
            "contextd_has_legacy_sessions", 0, lambda: True, deterministic=True
        )

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_session_factory(
    engine: Engine, caches: ProcessCaches | None = None
) -> sessionmaker[Session]:
    """Database sessions on `engine`, each reaching `caches` (new ones when none are given: an
    app hands its own, `app.storage.caches`)."""
    return sessionmaker(engine, expire_on_commit=False, info={CACHES: caches or ProcessCaches()})


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision` (Alembic)."""
    command.upgrade(alembic_config(url), revision)


def is_migrated(engine: Engine) -> bool:
    """True when the database answers and sits at the newest migration."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        return MigrationContext.configure(connection).get_current_revision() == head
