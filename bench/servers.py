"""Real processes and sockets on loopback, shared by the benchmarks and the end-to-end tests: a
contextd server process, and a TCP proxy in front of the database that can "stop" it or stall
it.

Invariants: everything started here is ended by its context manager or its `stop` (a server
process is terminated, then killed if it lingers; a proxy joins every thread it started), and
nothing here touches the PostgreSQL cluster itself, only connections to it. A server runs this
checkout's code.
"""

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

import httpx
from sqlalchemy.engine import make_url

from bench.common import ROOT, free_port


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
    an exact point of a conversation; `stall_after(text)` once it has forwarded it (the
    database applies it, and its answer is held back). `resume` forwards again (what was held
    back included)."""

    def __init__(self, upstream: tuple[str, int], port: int | None = None) -> None:
        self.upstream = upstream
        self.port = port or free_port()
        self._stopping = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._stall_at: bytes | None = None
        self._stall_after: bytes | None = None
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

    def stall_after(self, text: bytes) -> None:
        self._stall_after = text

    def resume(self) -> None:
        self._stall_at = self._stall_after = None
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
                        after = self._stall_after
                        if source is client and after is not None and after in data:
                            self._flowing.clear()
        except OSError:
            return
        finally:
            with self._lock:
                self._sockets.difference_update(peers)
            for sock in peers:
                sock.close()
