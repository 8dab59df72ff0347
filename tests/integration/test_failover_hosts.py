"""A database URL naming several hosts (libpq's multi-host form, `target_session_attrs=
read-write`, as after a failover): an old primary that refuses costs nothing, and one that
hangs instead of refusing costs the service one connection attempt, not every one, even when
that attempt alone takes a request's whole budget (a 1 s database timeout). Real PostgreSQL
behind a TCP proxy that accepts and never answers."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from app.main import create_app
from app.settings import Settings
from bench.servers import TcpProxy
from tests.builders import user_msg


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _hosts(postgres_url: str, first: str) -> str:
    """The test database's URL naming `first`, then the real server."""
    url = make_url(postgres_url)
    real = f"{url.host or '127.0.0.1'}:{url.port or 5432}"
    return url.set(
        host=None,
        port=None,
        query={"host": [first, real], "target_session_attrs": "read-write"},
    ).render_as_string(hide_password=False)


@pytest.mark.parametrize("old_primary", ["refusing", "hanging"])
def test_the_service_settles_on_the_host_that_answers(
    postgres_url: str, session_id: str, old_primary: str
) -> None:
    proxy = TcpProxy(
        (make_url(postgres_url).host or "127.0.0.1", make_url(postgres_url).port or 5432)
    )
    proxy.start()
    proxy.stall()
    first = f"127.0.0.1:{proxy.port if old_primary == 'hanging' else _closed_port()}"
    settings = Settings(database_url=_hosts(postgres_url, first), db_timeout_seconds=1)
    answers: list[tuple[int, str | None]] = []
    try:
        with TestClient(create_app(settings)) as client:
            for n in range(8):
                # A runtime's way: each call retried after a 503, at most three times.
                for path, body in (
                    ("/sessions", {"session_id": f"{session_id}-{n}"}),
                    (f"/sessions/{session_id}-{n}/items", {"items": [user_msg(f"step {n}")]}),
                ):
                    for _ in range(3):
                        response = client.post(path, json=body)
                        answers.append((response.status_code, response.headers.get("retry-after")))
                        if response.status_code != 503:
                            break
    finally:
        proxy.resume()
        proxy.stop()
    failed = [answer for answer in answers if answer[0] != 201]
    assert all(answer == (503, "5") for answer in failed), answers
    # A refusing host costs nothing; a hanging one, the first connection of each pool.
    assert len(failed) <= (0 if old_primary == "refusing" else 2), answers
    assert answers[-12:] == [(201, None)] * 12
