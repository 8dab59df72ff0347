"""Real processes and sockets on loopback for the end-to-end tests: a contextd server process
and a TCP proxy that can "stop the database" or stall it (both from `bench.servers`, which the
benchmarks share), and a slow hook endpoint. Everything is closed by its context manager;
nothing here touches the shared PostgreSQL cluster itself."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from bench.servers import Server, TcpProxy, running, with_port

__all__ = [
    "Server",
    "SlowHook",
    "TcpProxy",
    "raw_answer",
    "read_log",
    "read_until_closed",
    "running",
    "send_while_reading",
    "with_port",
]


class SlowHook:
    """A loopback HTTP endpoint that answers POSTs only after `delay` seconds (cut short when
    the hook is closed, so that no handler thread outlives the test)."""

    def __init__(self, delay: float) -> None:
        released = threading.Event()
        self._released = released

        class Slow(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                released.wait(delay)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_args: object) -> None:
                return

        class Quiet(ThreadingHTTPServer):
            daemon_threads = False  # handler threads are joined on close

            def handle_error(self, *_args: object) -> None:
                return  # the client hung up after its timeout: expected

        self.server = Quiet(("127.0.0.1", 0), Slow)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/pre-compact"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SlowHook:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def read_log(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    """Every item of a session's log, following `next_after_seq` page by page."""
    items: list[dict[str, Any]] = []
    after = 0
    for _ in range(1000):
        page = client.get(f"/sessions/{session_id}/items", params={"after_seq": after, "limit": 50})
        assert page.status_code == 200, page.text
        body = page.json()
        items.extend(body["items"])
        if body["next_after_seq"] is None:
            return items
        after = body["next_after_seq"]
    raise AssertionError("paging did not end")


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it ends the connection: closes it, or resets it (a
    server closing with unread bytes from the client resets). A generous socket timeout is the
    test's only safety net, never its measure."""
    sock.settimeout(60)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def send_while_reading(sock: socket.socket, chunks: Sequence[bytes], *, pause: float) -> bytes:
    """Sends `chunks` one at a time, `pause` seconds apart, while reading the answer as it
    comes, until the server ends the connection: bytes still going out after the server closed
    (which make it reset the connection) cannot overtake its answer. The answer."""
    answers: list[bytes] = []
    reader = threading.Thread(target=lambda: answers.append(read_until_closed(sock)))
    reader.start()
    for chunk in chunks:
        reader.join(pause)
        if not reader.is_alive():
            break
        try:
            sock.sendall(chunk)
        except OSError:
            break
    reader.join()
    return answers[0]


def raw_answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    """An HTTP/1.1 answer read off a socket: its status, headers (lower-case names) and JSON
    body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, json.loads(body)
