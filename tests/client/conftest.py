"""One real contextd process for the client tests, on the run's PostgreSQL database, with an API
key: every call goes over loopback through the client's own httpx stack, and both clients run
the same scenarios (the async one through `Awaited`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from contextd_client import AsyncContextdClient, ContextdClient, Retries, Timeouts
from tests.e2e.servers import Server, running

CONTRACT: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "openapi.yaml").read_text()
)
API_KEY = "ctx-client-tests-key"
QUICK = Retries(attempts=3, backoff=0.05)


@pytest.fixture(scope="session")
def server(postgres_url: str) -> Iterator[Server]:
    # An evaluation of more than 25 calls runs as a job: the clients follow it to its result.
    with running(
        postgres_url,
        CTX_API_KEYS=f'["client-tests:{API_KEY}"]',
        CTX_EVALUATE_SYNC_CALLS="25",
        CTX_EVALUATE_PROGRESS_SECONDS="0.01",
    ) as service:
        yield service


class Awaited:
    """An `AsyncContextdClient` whose methods are awaited on one event loop as they are
    called, so that a scenario written once runs against both clients."""

    def __init__(self, client: AsyncContextdClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if isinstance(result, AsyncIterator):
                return iter(self._loop.run_until_complete(_collect(result)))
            return self._loop.run_until_complete(result)

        return call


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def open_client(
    base: str, *, kind: str, api_key: str | None = API_KEY, **options: Any
) -> Iterator[ContextdClient]:
    """A client of `kind` ("sync" or "async") on `base`, closed afterwards."""
    if kind == "sync":
        with ContextdClient(base, api_key=api_key, **options) as client:
            yield client
        return
    loop = asyncio.new_event_loop()
    async_client = AsyncContextdClient(base, api_key=api_key, **options)
    try:
        yield cast(ContextdClient, Awaited(async_client, loop))
    finally:
        loop.run_until_complete(async_client.aclose())
        loop.close()


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def ctx(server: Server, kind: str) -> Iterator[ContextdClient]:
    """A client of each kind on the test server."""
    yield from open_client(server.base, kind=kind, retries=QUICK, timeouts=Timeouts(total=30))
