"""Real processes and sockets on loopback for the end-to-end tests: a contextd server process
and a TCP proxy that can "stop the database" or stall it (both from `bench.servers`, which the
benchmarks share), and a slow hook endpoint. Everything is closed by its context manager;
nothing here touches the shared PostgreSQL cluster itself."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from bench.servers import Server, TcpProxy, running, with_port

__all__ = ["Server", "SlowHook", "TcpProxy", "read_log", "running", "with_port"]


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
