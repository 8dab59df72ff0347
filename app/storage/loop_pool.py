"""Connections for a statement a request runs on the event loop, with no worker thread.

A request handed to a worker thread pays for the hop, a good share of what a small append
costs in all (`docs/performance.md`, "Appends on the event loop"). On PostgreSQL the append's
one statement (`appends.append_on_the_loop`) runs instead on psycopg's asyncio connection, in
autocommit, from a `psycopg_pool` pool of connections kept open (opened in the background at
startup, replaced when they fail). Its size (`database.loop_pool_size`) comes out of the
engine's overflow: a process still holds at most `connection_capacity` connections. The
engine's bounds hold here too (`app.storage.database`):

- a checkout draws on the request's wait budget;
- every answer comes within `answer_deadline`, or the connection is closed (a disconnect);
  the server cancels a statement past its timeout, the connection kept;
- the driver's errors are raised as SQLAlchemy raises them (`DBAPIError.instance`), so the API
  answers them as it answers the engine's: a database that cannot answer is a 503;
- a disconnect, or an error saying the host can no longer take writes
  (`database.SERVER_GONE_ELSEWHERE`), has the pool replace all its connections before the
  error is raised, as SQLAlchemy's invalidation replaces the engine's older connections.

The pool is small, so a request waits for one of its connections only briefly
(`CHECKOUT_SECONDS`): then it is `LoopPoolBusy`, and the caller takes a worker thread and the
engine's pool instead. Appends queued behind one session's row lock thus hold up another
session's, or another tenant's, for no longer than that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.abc import RV, PQGen
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, StatementError

from app.settings import Settings
from app.storage.database import (
    NotConnected,
    PreferredHost,
    answer_deadline,
    answer_limit,
    connect_args,
    drawing,
    gave_up,
    host_of,
    loop_pool_size,
    preferred_host,
    server_gone_elsewhere,
    unanswered,
    within_budget,
)

RECYCLE_SECONDS = 1800
"""A connection's longest life, as the engine's `pool_recycle`."""
CHECKOUT_SECONDS = 0.05
"""The longest wait for a connection of the pool: long enough to open one on a local network,
short against a request's wait budget."""


class LoopPoolBusy(Exception):
    """No connection of the loop's pool came within its checkout time (all in use, or the
    database slow to connect): nothing was sent; the caller takes the worker thread's way."""


class AsyncDeadlineConnection(psycopg.AsyncConnection[Any]):
    """psycopg's asyncio connection that gives up waiting for the server as
    `database.DeadlineConnection` does, for the same reasons."""

    answer_within: float | None = None
    host: tuple[str, str] | None = None
    preferred: PreferredHost | None = None
    """The pool's host order, told when this connection's host goes quiet."""

    async def wait(
        self,
        gen: PQGen[RV],
        interval: float = 0.1,
        timeout: float | None = None,  # noqa: ASYNC109 (psycopg's signature, overridden)
    ) -> RV:
        limit = answer_limit(self.answer_within, timeout)
        try:
            with drawing():
                return await super().wait(gen, interval, limit)
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


class LoopPool:
    """The pool of `AsyncDeadlineConnection`s in autocommit for one event loop: opened in the
    application's lifespan, closed at its end."""

    def __init__(
        self, engine: Engine, settings: Settings, *, checkout_seconds: float = CHECKOUT_SECONDS
    ) -> None:
        _, parameters = engine.dialect.create_connect_args(engine.url)
        self._checkout_seconds = checkout_seconds
        self._dialect = engine.dialect
        deadline = answer_deadline(settings)

        preferred = preferred_host(engine)

        async def configure(connection: AsyncDeadlineConnection) -> None:
            connection.answer_within = deadline
            connection.host, connection.preferred = host_of(connection), preferred
            preferred.took(connection.host)
            order_hosts()

        def order_hosts() -> None:
            # The pool's next connections try the hosts in the order its connections found.
            self._pool.kwargs = preferred.first(kwargs)

        async def not_to_a_quiet_host(connection: AsyncDeadlineConnection) -> None:
            # Its first statement would wait a whole answer deadline: the pool opens another.
            if preferred.quiet is not None and connection.host == preferred.quiet:
                raise psycopg.OperationalError("the connection's host went quiet")

        self._order_hosts = order_hosts

        kwargs = {**parameters, **connect_args(settings), "autocommit": True}
        self._pool = AsyncConnectionPool(
            connection_class=AsyncDeadlineConnection,
            kwargs=kwargs,
            min_size=loop_pool_size(settings),
            max_size=loop_pool_size(settings),
            open=False,
            configure=configure,
            check=not_to_a_quiet_host,
            timeout=checkout_seconds,
            max_lifetime=RECYCLE_SECONDS,
            name="contextd-loop",
        )

    async def open(self, *, wait: bool = False) -> None:
        """Start opening the pool's connections; with `wait`, until they are all open."""
        await self._pool.open(wait=wait)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def connection(self, statement: str) -> AsyncIterator[AsyncDeadlineConnection]:
        """A connection for `statement` (named in the errors raised), in autocommit."""
        try:
            with drawing():
                connection = await self._pool.getconn(within_budget(self._checkout_seconds))
        except PoolTimeout as busy:
            raise LoopPoolBusy(str(busy)) from busy
        except psycopg.Error as error:  # no connection: nothing was sent
            refused = NotConnected(str(error))
            raise self._as_sqlalchemy(None, refused, disconnect=False) from error
        failure: psycopg.Error | None = None
        try:
            yield connection
        except psycopg.Error as error:
            failure = error
        finally:
            await self._pool.putconn(connection)  # a closed one is replaced, not kept
        if failure is not None:
            disconnect = connection.closed or connection.broken
            self._order_hosts()
            if server_gone_elsewhere(failure):
                disconnect = True
            if disconnect:
                # The others most likely reach the same host (gone, quiet or read-only): all
                # are replaced, as SQLAlchemy's invalidation replaces the engine's. Testing
                # them one by one would wait on a quiet host once per connection.
                await self._pool.drain()
            raise self._as_sqlalchemy(statement, failure, disconnect=disconnect) from failure

    def _as_sqlalchemy(
        self, statement: str | None, error: psycopg.Error, *, disconnect: bool
    ) -> StatementError:
        return DBAPIError.instance(
            statement,
            None,
            error,
            psycopg.Error,
            connection_invalidated=disconnect,
            dialect=self._dialect,
        )


def create_loop_pool(engine: Engine, settings: Settings) -> LoopPool | None:
    """The loop's pool on PostgreSQL; None on SQLite, whose statements all run in threads."""
    return LoopPool(engine, settings) if engine.dialect.name == "postgresql" else None
