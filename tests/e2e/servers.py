"""Real processes and sockets on loopback for the end-to-end tests: a contextd server process,
a TCP proxy that can "stop the database" or stall it, and a slow hook endpoint. Everything is
closed by its context manager; nothing here touches the shared PostgreSQL cluster itself."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def with_port(database_url: str, port: int) -> str:
    """The same database reached through another port on loopback (e.g. a proxy)."""
    url = make_url(database_url).set(host="127.0.0.1", port=port)
    return url.render_as_string(hide_password=False)


class Server:
    """`contextd serve` as a real process. `start` waits for /readyz; `kill` is SIGKILL."""

    def __init__(
        self,
        database_url: str,
        *,
        port: int | None = None,
        workers: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.workers = workers
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "CTX_DATABASE_URL": database_url,
            "CTX_API_KEYS": "[]",
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 60.0) -> None:
        assert self.process is None
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "app.cli", "serve"),
                *("--port", str(self.port), "--workers", str(self.workers)),
            ],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError("the server did not become ready")

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing, whatever was in flight is cut."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


@contextlib.contextmanager
def running(database_url: str, *, workers: int = 1, **env: str) -> Iterator[Server]:
    server = Server(database_url, workers=workers, env=env)
    try:
        server.start()
        yield server
    finally:
        server.stop()


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `upstream`. `stop` closes the listener and every open
    connection (the database "goes away"); `start` listens again on the same port.

    `stall` keeps every connection open and forwards nothing, either way, on the connections
    open and on those accepted meanwhile: what a client sends is acknowledged by the kernel and
    never answered, as behind a hung database host or a wedged load balancer. `stall_at(text)`
    stalls the same way as soon as a client sends `text` (before forwarding it), for a stall at
    an exact point of a conversation. `resume` forwards again (what was held back included)."""

    def __init__(self, upstream: tuple[str, int], port: int | None = None) -> None:
        self.upstream = upstream
        self.port = port or free_port()
        self._stopping = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._stall_at: bytes | None = None
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        self._stopping.clear()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._spawn(self._accept, listener)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = [t for t in self._threads if t.is_alive()]
        assert not self._threads, "proxy threads did not stop"

    def stall(self) -> None:
        self._flowing.clear()

    def stall_at(self, text: bytes) -> None:
        self._stall_at = text

    def resume(self) -> None:
        self._stall_at = None
        self._flowing.set()

    def _spawn(self, target: Callable[..., object], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while not self._stopping.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                try:
                    upstream = socket.create_connection(self.upstream, timeout=2)
                except OSError:
                    client.close()
                    continue
                self._spawn(self._pump, client, upstream)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with self._lock:
            self._sockets.update(peers)
        try:
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    sock.setblocking(True)
                    selector.register(sock, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    if not self._flowing.wait(timeout=0.1):
                        continue
                    for key, _ in selector.select(timeout=0.1):
                        source = key.fileobj
                        assert isinstance(source, socket.socket)
                        data = source.recv(65536)
                        if not data:
                            return
                        trigger = self._stall_at
                        if source is client and trigger is not None and trigger in data:
                            self._flowing.clear()
                        while not self._flowing.wait(timeout=0.1):
                            if self._stopping.is_set():
                                return
                        peers[source].sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._sockets.difference_update(peers)
            for sock in peers:
                sock.close()


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
