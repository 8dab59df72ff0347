"""Loopback middlemen between a client and the test server, for the failures a client must
survive: a TCP proxy that loses answers after the server has sent them, and an HTTP front that
answers 503 with a `Retry-After` before it lets requests through. Both record what they saw and
stop with their context manager, joining every thread they started."""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx


class AnswerDroppingProxy:
    """Forwards to `upstream` byte for byte, except that the next `drop_answers(n)` answers
    are swallowed: the server has written its answer (so it has committed), and the client's
    connection is closed before it reads a byte of it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._to_drop = 0
        self.sent = bytearray()
        """Every byte clients sent through the proxy."""
        self.answers: list[tuple[str, bool]] = []
        """The status line of each answer the server gave, and whether it was dropped."""

    def drop_answers(self, count: int) -> None:
        with self._lock:
            self._to_drop = count

    def idempotency_keys(self) -> list[str]:
        return [key.decode() for key in re.findall(rb'"idempotency_key":"([^"]+)"', self.sent)]

    def __enter__(self) -> Self:
        self._spawn(self._accept)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _spawn(self, target: Any, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._spawn(self._pump, client, socket.create_connection(self.upstream))

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        with client, upstream, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ)
            selector.register(upstream, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select(timeout=0.1):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    if key.fileobj is client:
                        with self._lock:
                            self.sent += data
                        upstream.sendall(data)
                        continue
                    with self._lock:
                        starts = data.startswith(b"HTTP/")  # not the rest of a long answer
                        dropped = starts and self._to_drop > 0
                        self._to_drop -= dropped
                        if starts:
                            self.answers.append((data.split(b"\r\n", 1)[0].decode(), dropped))
                    if dropped:
                        return  # closing both: the client never sees this answer
                    client.sendall(data)


class UnavailableFront:
    """An HTTP front of `upstream` that answers the first `count` requests with a 503 and
    `Retry-After: retry_after`, in the service's error shape, and forwards the rest."""

    def __init__(self, upstream: str, *, count: int, retry_after: str) -> None:
        self.requests: list[tuple[str, str, bytes]] = []
        lock = threading.Lock()
        remaining = [count]
        relay = httpx.Client(base_url=upstream, timeout=30)
        self._relay = relay
        seen = self.requests

        class Front(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with lock:
                    seen.append((self.command, self.path, body))
                    unavailable = remaining[0] > 0
                    remaining[0] -= unavailable
                if unavailable:
                    error = (
                        b'{"error": {"code": "database_unavailable", "message": "the database is'
                        b' unavailable; retry later", "details": null}}'
                    )
                    self._send(503, error, {"retry-after": retry_after})
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = relay.request(self.command, self.path, content=body, headers=headers)
                self._send(answer.status_code, answer.content, {})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in {**headers, "content-type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _answer  # noqa: N815 - the handler's method names

            def log_message(self, *_args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Front)
        self._server.daemon_threads = False
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def idempotency_keys(self) -> list[str]:
        return [
            key.decode()
            for _, _, body in self.requests
            for key in re.findall(rb'"idempotency_key":"([^"]+)"', body)
        ]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._relay.close()
