"""A request head (line and headers) that is too large is answered 431, and one that stalls or
trickles 408, its connection closed, on a real server: a client holds a socket and a few
kilobytes for no longer than the head deadline, however it sends (the audit's 200 connections
trickling 2 MiB headers took 417 MiB)."""

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

BOUNDS = {"CTX_HEADER_TIMEOUT_SECONDS": "1", "CTX_MAX_HEADER_BYTES": "65536"}


@pytest.fixture(scope="module")
def server(postgres_url: str) -> Iterator[Server]:
    with running(postgres_url, workers=1, **BOUNDS) as started:
        yield started


TOO_LARGE = {
    "error": {
        "code": "headers_too_large",
        "message": "the request line and headers exceed 65536 bytes (CTX_MAX_HEADER_BYTES)",
        "details": None,
    }
}
TOO_LATE = {
    "error": {
        "code": "request_timeout",
        "message": "the request's headers did not arrive within 1 s (CTX_HEADER_TIMEOUT_SECONDS)",
        "details": None,
    }
}


def test_a_two_mebibyte_header_is_answered_431_and_the_connection_closed(server: Server) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * (2 << 20)
    chunks = [head[start : start + 16_384] for start in range(0, len(head), 16_384)]
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        status, headers, body = raw_answer(send_while_reading(sock, chunks, pause=0))
    assert (status, headers["connection"], body) == (431, "close", TOO_LARGE)


def test_a_trickled_head_is_answered_408_at_the_deadline(server: Server) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        # A byte every 0.1 s: each well inside any per-read timeout.
        answer = send_while_reading(sock, [bytes([byte]) for byte in head], pause=0.1)
    status, headers, body = raw_answer(answer)
    assert (status, headers["connection"], body) == (408, "close", TOO_LATE)


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        status, _, body = raw_answer(read_until_closed(sock))
    assert (status, body) == (408, TOO_LATE)


def test_heads_in_time_are_served_with_bodies_larger_than_the_head_bound(server: Server) -> None:
    """Keep-alive requests, each head in time, and a 300 kB body sent with its head in one
    write: only the head counts against the head's bound."""
    session_id = f"heads-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=server.base) as client:
        assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
        assert client.get("/healthz").status_code == 200
    payload = json.dumps({"items": [{"role": "user", "content": "x" * 300_000}]}).encode()
    head = (
        f"POST /sessions/{session_id}/items HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head + payload)
        status, _, body = raw_answer(read_until_closed(sock))
    assert (status, body["last_seq"]) == (201, 1)
