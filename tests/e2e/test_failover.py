"""A PostgreSQL failover under load, with real processes throughout: two clusters on loopback
(a primary and a synchronous streaming standby), the service given both hosts in libpq's
multi-host form with `target_session_attrs=read-write`, appenders retrying with idempotency
keys (one per session); then the primary is killed with -9 and the standby promoted. The old
primary's address either refuses (the host is gone) or hangs (a proxy in front of it accepts
and never answers), at the default database timeout and at 1 s.

Every acknowledged item is in the log exactly once, every session dense, no answer is a 500.
Until the promotion ends every attempt fails (no host takes writes); of the attempts begun
after it, each appender meets at most one failure while the pools find the new primary. Each
fact records the timeline that wrote it: the old primary's, then the promoted standby's.

With an asynchronous standby, what it had not received when the primary died is lost although
acknowledged, and its seqs are given again; the timeline tells a client which.

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
from typing import Any

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

    def start(self, *options: str) -> None:
        """Starts the server, with `options` on its command line."""
        _as_postgres(
            str(BIN / "pg_ctl"),
            *("-D", str(self.data), "-l", str(self.log), "-w", "start"),
            *(("-o", " ".join(options)) if options else ()),
        )

    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

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
        with psycopg.connect(self.conninfo(), autocommit=True) as db:
            db.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
            db.execute("SELECT pg_reload_conf()")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError, ValueError):
            if (self.data / "postmaster.pid").exists():
                _as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")


@contextlib.contextmanager
def replicated(
    *, synchronous: bool = True, link: TcpProxy | None = None
) -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and a standby of it, on loopback, with a `contextd` database. The standby is
    synchronous (a commit waits for it) or not, and streams from the primary through `link`
    when given (a proxy, started, whose upstream is the port the primary is to take), so that
    a test can cut it."""
    root = Path(tempfile.mkdtemp(prefix="contextd-failover-"))
    postgres = pwd.getpwnam("postgres")
    os.chown(root, postgres.pw_uid, postgres.pw_gid)
    primary = Cluster(root / "primary", link.upstream[1] if link else free_port())
    standby = Cluster(root / "standby", free_port())
    try:
        _as_postgres(str(BIN / "initdb"), "-D", str(primary.data), "-A", "trust", "-U", "postgres")
        waits_for = "*" if synchronous else ""
        (primary.data / "postgresql.auto.conf").write_text(
            f"port = {primary.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
            f"wal_level = replica\nmax_wal_senders = 4\nsynchronous_standby_names = '{waits_for}'\n"
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
            if link is not None:
                conf.write(f"primary_conninfo = 'host=127.0.0.1 port={link.port} user=postgres'\n")
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


def _migrated(first: int, second: int) -> str:
    """The service's URL naming both hosts in libpq's multi-host form, writable one wanted, with
    the `contextd` database on it migrated."""
    url = (
        "postgresql+psycopg://postgres@/contextd"
        f"?host=127.0.0.1:{first}&host=127.0.0.1:{second}&target_session_attrs=read-write"
    )
    subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"],
        env={**os.environ, "CTX_DATABASE_URL": url},
        check=True,
        capture_output=True,
    )
    return url


@dataclass
class Tally:
    acked: dict[str, list[str]] = field(default_factory=dict)
    """Each session's texts, as acknowledged, in order."""
    unacked: dict[str, str] = field(default_factory=dict)
    """Each session's item whose append was still being retried when the appenders stopped:
    the log may hold it or not."""
    statuses: list[int] = field(default_factory=list)
    failures: list[tuple[float, int, str]] = field(default_factory=list)
    """Each failed attempt: when it began (`time.monotonic()`), its status, its message."""
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
                began = time.monotonic()
                try:
                    answer = client.post(f"/sessions/{session}/items", json=body)
                    status, said = answer.status_code, answer.text
                except httpx.TransportError as error:
                    status, said = 0, repr(error)
                with tally.lock:
                    tally.statuses.append(status)
                    if status in (200, 201):
                        tally.acked[session].append(text)
                    else:
                        tally.failures.append((began, status, said[:300]))
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
        url = _migrated(first, standby.port)
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
                killed = time.monotonic()
                primary.kill()
                standby.promote()
                promoted = time.monotonic()
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
        # Written on the old primary's timeline, then on the promoted standby's.
        assert [entry["timeline"] for entry in logged] == sorted(
            entry["timeline"] for entry in logged
        )
        assert {entry["timeline"] for entry in logged} == {1, 2}
    # Until the standby is promoted no host takes writes, and every attempt fails (how many
    # depends on how long the promotion takes: seconds on a busy machine). Once it is, each
    # appender meets at most one more failure while the pools find the new primary: a bound on
    # attempts, not on time (the seconds it takes are in docs/operations.md).
    late = [failure for failure in tally.failures if failure[0] > promoted]
    assert len(late) <= SESSIONS, _told(tally.failures, killed, promoted)


def _told(failures: list[tuple[float, int, str]], killed: float, promoted: float) -> str:
    """The failures by when they came, against the kill and the end of the promotion."""
    lines = [f"{len(failures)} failures; the promotion took {promoted - killed:.2f} s"]
    for began, status, said in failures[:6] + [f for f in failures if f[0] > promoted]:
        lines.append(f"begun {began - killed:+.2f} s after the kill: {status} {said}")
    return "\n".join(lines)


def _caught_up(primary: Cluster, standby: Cluster) -> None:
    """Waits until the standby has replayed everything the primary has written."""
    with (
        psycopg.connect(primary.conninfo(), autocommit=True) as writer,
        psycopg.connect(standby.conninfo(), autocommit=True) as reader,
    ):
        written = writer.execute("SELECT pg_current_wal_lsn()").fetchone()
        for _ in range(600):
            replayed = reader.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", written
            ).fetchone()
            if replayed == (True,):
                return
            time.sleep(0.05)
    raise AssertionError("the standby did not catch up")


def _append_until_acked(client: httpx.Client, session: str, text: str) -> dict[str, Any]:
    for _ in range(600):
        with contextlib.suppress(httpx.TransportError):
            answer = client.post(f"/sessions/{session}/items", json={"items": [user_msg(text)]})
            assert answer.status_code in (201, 503), answer.text
            if answer.status_code == 201:
                acked: dict[str, Any] = answer.json()
                return acked
        time.sleep(0.05)
    raise AssertionError(f"{text!r} was never acknowledged")


def test_a_failover_to_an_asynchronous_standby_loses_its_lag_and_the_timeline_tells() -> None:
    """What the synchronous standby is for. The replication link is cut, appends go on (an
    asynchronous standby does not hold a commit back), then the primary dies and the standby is
    promoted: the appends it never received are lost although they were acknowledged, and the
    next appends take their seqs. Each acknowledged seq either reads back as acknowledged, on
    the timeline its answer named, or reads back on another timeline: the loss is visible to a
    client that kept the timeline, never a silent change of content."""
    link = TcpProxy(("127.0.0.1", free_port()))
    link.start()
    try:
        with replicated(synchronous=False, link=link) as (primary, standby):
            url = _migrated(primary.port, standby.port)
            acked: list[tuple[int, int, str]] = []
            with running(url) as server, httpx.Client(base_url=server.base, timeout=30) as client:
                client.post("/sessions", json={"session_id": "s"}).raise_for_status()

                def append(text: str) -> None:
                    answer = _append_until_acked(client, "s", text)
                    acked.append((int(answer["first_seq"]), int(answer["timeline"]), text))

                for n in range(10):
                    append(f"replicated {n}")
                _caught_up(primary, standby)
                link.stall()
                for n in range(10):
                    append(f"lost {n}")
                primary.kill()
                standby.promote()
                for n in range(10):
                    append(f"after {n}")
                # The worker threads' pool finds its connections to the dead host on its first
                # reads, each a 503; the reads are retried as a runtime would.
                for _ in range(100):
                    if client.get("/sessions/s").status_code == 200:
                        break
                    time.sleep(0.05)
                logged = {entry["seq"]: entry for entry in read_log(client, "s")}
    finally:
        link.resume()
        link.stop()
    assert [seq for seq, _, _ in acked[:20]] == list(range(1, 21))
    assert {timeline for _, timeline, _ in acked[:20]} == {1}
    # The lost appends' seqs were given again, on the new primary's timeline.
    assert [(seq, timeline) for seq, timeline, _ in acked[20:]] == [(s, 2) for s in range(11, 21)]
    assert [logged[seq]["timeline"] for seq in sorted(logged)] == [1] * 10 + [2] * 10
    for seq, timeline, text in acked:
        entry = logged[seq]
        if entry["timeline"] == timeline:
            assert entry["item"] == user_msg(text)  # as acknowledged
        else:
            assert text.startswith("lost")  # lost, and told by the timeline


def test_the_compose_standby_profile_scripts_make_a_synchronous_standby() -> None:
    """`docker-compose.yml`'s `standby` profile, its scripts run here as the profile runs them:
    `deploy/postgres/pg_hba.conf` on the primary, `deploy/standby/primary.sh` against it, then
    `deploy/standby/standby.sh` as the standby's server. A commit on the primary waits for the
    standby, which replays it; once promoted, the standby waits for no standby of its own."""
    deploy = Path(__file__).parents[2] / "deploy"
    root = Path(tempfile.mkdtemp(prefix="contextd-compose-standby-"))
    postgres = pwd.getpwnam("postgres")
    for script in (deploy / "standby").glob("*.sh"):
        shutil.copy(script, root / script.name)
    shutil.copy(deploy / "postgres" / "pg_hba.conf", root / "pg_hba.conf")
    os.chown(root, postgres.pw_uid, postgres.pw_gid)
    primary = Cluster(root / "primary", free_port())
    standby = Cluster(root / "standby", free_port())
    path = f"{BIN}:{os.environ['PATH']}"
    server: subprocess.Popen[bytes] | None = None
    try:
        _as_postgres(str(BIN / "initdb"), "-D", str(primary.data), "-A", "trust", "-U", "postgres")
        primary.start(
            f"-p {primary.port}",
            "-c listen_addresses=127.0.0.1",
            "-c unix_socket_directories=''",
            f"-c hba_file={root / 'pg_hba.conf'}",
        )
        subprocess.run(
            ["sh", str(root / "primary.sh")],
            env={
                "PATH": path,
                "PGHOST": "127.0.0.1",
                "PGPORT": str(primary.port),
                "PGUSER": "postgres",
                "PGDATABASE": "postgres",
                "REPLICATOR_PASSWORD": "a secret",
            },
            check=True,
            capture_output=True,
        )
        standby_environment = {
            "PATH": path,
            "PGDATA": str(standby.data),
            "PGPORT": str(standby.port),
            "PRIMARY_HOST": "127.0.0.1",
            "PRIMARY_PORT": str(primary.port),
            "PGPASSWORD": "a secret",
        }
        server = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", "env"]
            + [f"{name}={value}" for name, value in standby_environment.items()]
            + ["sh", str(root / "standby.sh")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(600):
            with contextlib.suppress(psycopg.OperationalError):
                psycopg.connect(standby.conninfo(), autocommit=True).close()
                break
            time.sleep(0.05)
        with psycopg.connect(primary.conninfo(), autocommit=True) as db:
            db.execute("CREATE TABLE written (n integer)")
            db.execute("INSERT INTO written VALUES (1)")  # returns once the standby has it
            states = db.execute("SELECT sync_state FROM pg_stat_replication").fetchall()
        assert states == [("sync",)]
        with psycopg.connect(standby.conninfo(), autocommit=True) as db:
            assert db.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
            _caught_up(primary, standby)
            assert db.execute("SELECT n FROM written").fetchall() == [(1,)]
            db.execute("SELECT pg_promote()")
            assert db.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
            assert db.execute("SHOW synchronous_standby_names").fetchone() == ("",)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        primary.stop()
        shutil.rmtree(root, ignore_errors=True)
