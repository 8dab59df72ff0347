"""A PostgreSQL failover under load, with real processes throughout: two clusters on loopback
(a primary and a synchronous streaming standby), the service given both hosts in libpq's
multi-host form with `target_session_attrs=read-write`, appenders retrying with idempotency
keys (one per session); then the primary is killed with -9 and the standby promoted. The old
primary's address either refuses (the host is gone) or hangs (a proxy in front of it accepts
and never answers), at the default database timeout and at 1 s.

Every acknowledged item is in the log exactly once, every session dense, no answer is a 500,
and each appender meets at most two failures: the append in flight when the primary died, and
one more while the pools find the new primary.

The clusters run as the `postgres` user (PostgreSQL refuses root), in directories of their
own; the test is skipped where the server binaries or that user are missing.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from bench.common import free_port
from tests.builders import user_msg
from tests.e2e.servers import TcpProxy, read_log, running

BIN = Path("/usr/lib/postgresql/15/bin")
SESSIONS = 4

pytestmark = pytest.mark.skipif(
    not (BIN / "initdb").exists() or shutil.which("runuser") is None,
    reason="needs PostgreSQL's server binaries and runuser",
)


def _as_postgres(*command: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True
    )


@dataclass
class Cluster:
    data: Path
    port: int
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.data.parent / f"{self.data.name}.log"

    def start(self) -> None:
        _as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "start")

    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """SIGKILL to the postmaster and every backend: the host is gone mid-write."""
        postmaster = self.pid()
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True
        ).stdout.split()
        for pid in [postmaster, *map(int, children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        """The standby becomes the primary and, with no standby of its own, stops waiting for
        one (what an HA manager does on a failover, else every commit would wait for ever)."""
        _as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-w", "promote")
        conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as db:
            db.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
            db.execute("SELECT pg_reload_conf()")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError, ValueError):
            if (self.data / "postmaster.pid").exists():
                _as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")


@contextlib.contextmanager
def replicated() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and a synchronous standby of it, on loopback, with a `contextd` database."""
    root = Path(tempfile.mkdtemp(prefix="contextd-failover-"))
    postgres = pwd.getpwnam("postgres")
    os.chown(root, postgres.pw_uid, postgres.pw_gid)
    primary = Cluster(root / "primary", free_port())
    standby = Cluster(root / "standby", free_port())
    try:
        _as_postgres(str(BIN / "initdb"), "-D", str(primary.data), "-A", "trust", "-U", "postgres")
        (primary.data / "postgresql.auto.conf").write_text(
            f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
            "wal_level = replica\nmax_wal_senders = 4\nsynchronous_standby_names = '*'\n"
            "fsync = off\n"
        )
        (primary.data / "pg_hba.conf").write_text(
            "host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
        )
        primary.start()
        _as_postgres(
            str(BIN / "pg_basebackup"),
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
            *("-D", str(standby.data), "-R", "-X", "stream"),
        )
        with (standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"port = {standby.port}\n")
        standby.start()
        _as_postgres(
            str(BIN / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "contextd",
        )
        yield primary, standby
    finally:
        standby.stop()
        primary.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Tally:
    acked: dict[str, list[str]] = field(default_factory=dict)
    """Each session's texts, as acknowledged, in order."""
    unacked: dict[str, str] = field(default_factory=dict)
    """Each session's item whose append was still being retried when the appenders stopped:
    the log may hold it or not."""
    statuses: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _appender(base: str, session: str, tally: Tally) -> None:
    """Appends one item at a time, each under its own idempotency key, retried until it is
    acknowledged: a runtime that never gives up on a write."""
    with httpx.Client(base_url=base, timeout=30) as client:
        n = 0
        while not tally.stop.is_set():
            text = f"{session} item {n}"
            body = {"items": [user_msg(text)], "idempotency_key": f"{session}-{n}"}
            while True:
                try:
                    answer = client.post(f"/sessions/{session}/items", json=body)
                    status = answer.status_code
                except httpx.TransportError:
                    status = 0
                with tally.lock:
                    tally.statuses.append(status)
                    if status in (200, 201):
                        tally.acked[session].append(text)
                if status in (200, 201):
                    break
                if tally.stop.is_set():
                    tally.unacked[session] = text
                    return
                time.sleep(0.05)
            n += 1


@pytest.mark.parametrize(
    ("old_primary", "db_timeout"),
    [("refusing", "5"), ("hanging", "5"), ("hanging", "1")],
)
def test_a_failover_to_a_synchronous_standby_loses_nothing(
    old_primary: str, db_timeout: str
) -> None:
    with replicated() as (primary, standby):
        proxy = TcpProxy(("127.0.0.1", primary.port))
        proxy.start()
        first = proxy.port if old_primary == "hanging" else primary.port
        url = (
            "postgresql+psycopg://postgres@/contextd"
            f"?host=127.0.0.1:{first}&host=127.0.0.1:{standby.port}"
            "&target_session_attrs=read-write"
        )
        subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"],
            env={**os.environ, "CTX_DATABASE_URL": url},
            check=True,
            capture_output=True,
        )
        tally = Tally(acked={f"s{n}": [] for n in range(SESSIONS)})
        try:
            with running(url, CTX_DB_TIMEOUT_SECONDS=db_timeout) as server:
                for session in tally.acked:
                    httpx.post(f"{server.base}/sessions", json={"session_id": session})
                # One appender a session, so that the session's log has one order to check.
                appenders = [
                    threading.Thread(target=_appender, args=(server.base, session, tally))
                    for session in tally.acked
                ]
                for thread in appenders:
                    thread.start()
                time.sleep(2)
                if old_primary == "hanging":
                    proxy.stall()
                primary.kill()
                standby.promote()
                time.sleep(12)
                tally.stop.set()
                for thread in appenders:
                    thread.join(timeout=60)
                with httpx.Client(base_url=server.base) as client:
                    logs = {session: read_log(client, session) for session in tally.acked}
        finally:
            tally.stop.set()
            proxy.resume()
            proxy.stop()
    assert 500 not in tally.statuses
    assert set(tally.statuses) <= {0, 200, 201, 503}, set(tally.statuses)
    assert sum(map(len, tally.acked.values())) > 50
    for session, texts in tally.acked.items():
        logged = logs[session]
        assert [entry["seq"] for entry in logged] == list(range(1, len(logged) + 1))
        # Each acknowledged item once, in order, and nothing else (but the one still retried).
        expected = [user_msg(text) for text in texts]
        items = [entry["item"] for entry in logged]
        if session in tally.unacked and len(items) == len(expected) + 1:
            expected.append(user_msg(tally.unacked[session]))
        assert items == expected, session
    # The calls in flight when the primary died fail, and at most one more each while the
    # pools find the new primary: a bound on attempts, not on time (the seconds it takes are in
    # docs/operations.md).
    failures = sum(status not in (200, 201) for status in tally.statuses)
    assert failures <= 2 * SESSIONS, tally.statuses.count(503)
