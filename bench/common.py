"""Shared bench plumbing: a throwaway PostgreSQL database and a real server process on it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

from app.storage.database import migrate

ROOT = Path(__file__).resolve().parents[1]
TRAJECTORIES = sorted((ROOT / "tests" / "data" / "trajectories").glob("*.jsonl"))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ADMIN_URL = os.environ.get(
    "CTX_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def load_trajectories() -> dict[str, list[dict[str, Any]]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in TRAJECTORIES
    }


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.contextmanager
def bench_database(name: str, *, source: Path = ROOT) -> Iterator[str]:
    """A fresh database named after `name` and this process (two runs at once on one cluster
    must not drop each other's), migrated by the code of the checkout at `source` (this one by
    default: another checkout's schema may be older), dropped afterwards."""
    name = f"{name}_{os.getpid()}"
    with psycopg.connect(libpq(ADMIN_URL), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    if source == ROOT:
        migrate(url)
    else:
        subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"],
            env={**os.environ, "CTX_DATABASE_URL": url},
            cwd=source,
            check=True,
        )
    try:
        yield url
    finally:
        with psycopg.connect(libpq(ADMIN_URL), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def running_server(
    database_url: str,
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    source: Path = ROOT,
) -> Iterator[str]:
    """A `contextd serve` process on `database_url`, with `env` added to its environment,
    running the code of the checkout at `source` (this one by default)."""
    port = free_port()
    env = {**os.environ, **(env or {}), "CTX_DATABASE_URL": database_url, "CTX_API_KEYS": "[]"}
    # `python -m` puts the working directory first on the path: its `app` is the one served.
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        cwd=source,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("the server did not become ready")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def server_ms(response: httpx.Response) -> float:
    """The server time the service reports in `Server-Timing` (refusing an error response)."""
    response.raise_for_status()
    return float(response.headers["server-timing"].split("dur=")[1])


def percentile(values: list[float], share: float) -> float:
    """The `share` (0.01 to 0.99) percentile, interpolated inclusively."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1]


def server_cpu_seconds(base: str) -> float:
    """CPU seconds (user and system) spent so far by the server listening at `base` and the
    worker processes it started."""
    port = base.rsplit(":", 1)[1].encode()
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    roots = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
        if b"app.cli\0serve\0--port\0" + port + b"\0" in command:
            roots.append(pid)
    tree = set(roots)
    while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return sum(ticks[pid] for pid in tree) / CLOCK_TICKS


def backend_cpu_seconds(pid: int) -> float:
    """CPU seconds spent so far by the PostgreSQL backend `pid` (a connection's
    `info.backend_pid`): the bench's PostgreSQL runs on this machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def database_cpu_seconds(database_url: str) -> float:
    """CPU seconds spent so far by the PostgreSQL backends serving `database_url`'s database
    that are alive now (their process titles name it): a run's connections must outlive its
    second reading, as a server's pooled ones do."""
    title = f" {make_url(database_url).database} ".encode()
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            if command.startswith(b"postgres: ") and title in command:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
        except OSError:
            continue  # gone meanwhile
    return ticks / CLOCK_TICKS
