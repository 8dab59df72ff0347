"""A request body that stalls or trickles is answered 408 and its connection closed, on a real
server: a slow-body client holds a socket no longer than the body deadline."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.servers import (
    Server,
    raw_answer,
    read_until_closed,
    running,
    send_while_reading,
)

DEADLINE = {"CTX_BODY_TIMEOUT_SECONDS": "1"}


@pytest.fixture(scope="module")
def server(postgres_url: str) -> Iterator[Server]:
    with running(postgres_url, workers=1, **DEADLINE) as started:
        yield started


def _head(session_id: str, length: int) -> bytes:
    return (
        f"POST /sessions/{session_id}/items HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


EXPECTED = {
    "error": {
        "code": "request_timeout",
        "message": "the request body did not arrive whole within 1 s",
        "details": None,
    }
}


def _session(server: Server) -> str:
    session_id = f"slow-{uuid.uuid4().hex[:8]}"
    httpx.post(f"{server.base}/sessions", json={"session_id": session_id}).raise_for_status()
    return session_id


def _facts(server: Server, session_id: str) -> int:
    detail = httpx.get(f"{server.base}/sessions/{session_id}").json()
    last_seq: int = detail["last_seq"]
    return last_seq


def test_a_body_that_stalls_is_answered_408_and_the_connection_closed(server: Server) -> None:
    session_id = _session(server)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_head(session_id, 100) + b"{")
        status, headers, body = raw_answer(read_until_closed(sock))

    assert (status, headers["connection"], body) == (408, "close", EXPECTED)
    assert _facts(server, session_id) == 0


def test_a_body_that_trickles_is_held_to_one_deadline_for_the_whole_body(server: Server) -> None:
    session_id = _session(server)
    payload = json.dumps({"items": [{"role": "user", "content": "x" * 200}]}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_head(session_id, len(payload)))
        # A byte every 0.2 s: each well inside any per-chunk timeout.
        answer = send_while_reading(sock, [bytes([byte]) for byte in payload], pause=0.2)

    status, headers, body = raw_answer(answer)
    assert (status, headers["connection"], body) == (408, "close", EXPECTED)
    assert _facts(server, session_id) == 0


def test_a_body_that_arrives_in_time_is_served_on_the_same_server(server: Server) -> None:
    session_id = _session(server)
    answer = httpx.post(
        f"{server.base}/sessions/{session_id}/items",
        json={"items": [{"role": "user", "content": "hello"}]},
    )
    assert answer.status_code == 201, answer.text
    assert _facts(server, session_id) == 1
