"""A realistic mix from many concurrent clients against contextd on one PostgreSQL, at one or
more server sizes.

Each client (an asyncio task with its own HTTP connection) plays an agent over one of the
public trajectories: it appends the next 1–5 items to its session, assembles the context in
session mode, normalizes a slice of the trajectory statelessly and, every few turns, compacts
with `clear_tool_results`. When its trajectory is exhausted it starts a new session on the next.

A configuration is `replicas` separate server processes of `workers` workers each, all on one
database; clients are spread over the replicas in turn. Every run gets a fresh database. Per run
it prints throughput overall and per endpoint, p50/p99 latency per endpoint, non-2xx answers by
status (the run fails on any), the peak RSS of the server processes (VmHWM of each), the CPU
the run took (this load generator, the server processes, the PostgreSQL backends of the run's
database, and the machine as a whole), the most backends the run held at once, and what the
database grew by per 1,000 sessions: `pg_database_size` and the total size (heap, TOAST,
indexes) of `facts`, `assemblies` and `sessions`, over the sessions created and over whole
runs (items appended ÷ the trajectories' mean length, since the last session of each client
ends where the run does). With several runs, a summary gives each configuration's medians.

The load generator runs on the same machine as the server and PostgreSQL and takes CPU from
them: read the CPU lines before comparing configurations.
Run: `.venv/bin/python -m bench.load [--seconds 20] [--clients 32] [--workers 1 2 4]
[--replicas 1] [--repeat 1]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import resource
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from bench.common import bench_database, libpq, load_trajectories, percentile, running_server

NORMALIZE_WINDOW = 40
COMPACT_EVERY = 8
SIZED_TABLES = ("facts", "assemblies", "sessions")
ENDPOINTS = {
    "POST /sessions/{id}/items": "append",
    "POST /assemble": "assemble",
    "POST /history/normalize": "normalize",
    "POST /compact": "compact",
    "POST /sessions": "create",
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def server_processes() -> list[int]:
    """Every descendant of this process: the servers started by `running_server` and their
    workers (the bench itself starts no other process)."""
    pending, seen = _children(os.getpid()), []
    while pending:
        pid = pending.pop()
        if pid not in seen:
            seen.append(pid)
            pending.extend(_children(pid))
    return seen


def vm_hwm_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def role(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    for needle, name in (
        ("app.cli", "main"),
        ("resource_tracker", "resource tracker"),
        ("spawn_main", "worker"),
    ):
        if needle in command:
            return name
    return command.split(" ", 1)[0]


def cpu_ticks_of(stat: str) -> int:
    """User + system CPU time, in clock ticks, from the text of `/proc/<pid>/stat` (the
    command name in parentheses may hold spaces, so fields are counted after its `)`)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def busy_and_total_ticks(proc_stat: str) -> tuple[int, int]:
    """The machine's busy and total CPU ticks from the first line of `/proc/stat` (idle and
    iowait are not busy)."""
    ticks = [int(value) for value in proc_stat.splitlines()[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, sum(ticks)


def process_ticks(pid: int) -> int | None:
    try:
        return cpu_ticks_of(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return None


class Sampler:
    """Samples, every half second while a run lasts, what the run costs beyond its answers:
    the peak RSS (the kernel's own VmHWM) and CPU time of every server process, the CPU time
    of the PostgreSQL backends serving the run's database and how many there are at once.
    CPU is counted from the sampler's start (a server's start-up is not the run's), and the
    load generator's own from its resource usage."""

    def __init__(self, database_url: str) -> None:
        self.peak_kib: dict[int, int] = {}
        self.roles: dict[int, str] = {}
        self.peak_backends = 0
        self._ticks: dict[str, dict[int, list[int]]] = {"server": {}, "postgres": {}}
        self._database = psycopg.connect(libpq(database_url), autocommit=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started_at = 0.0
        self.seconds = 0.0
        self.cpu_seconds: dict[str, float] = {}

    def _backends(self) -> list[int]:
        rows = self._database.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [int(row[0]) for row in rows]

    def _count(self, kind: str, pid: int, *, first: bool) -> None:
        ticks = process_ticks(pid)
        if ticks is None:
            return
        # A process seen at the start counts from there; one born later from zero.
        start, _ = self._ticks[kind].setdefault(pid, [ticks if first else 0, ticks])
        self._ticks[kind][pid] = [start, ticks]

    def sample(self, *, first: bool = False) -> None:
        for pid in server_processes():
            hwm = vm_hwm_kib(pid)
            if hwm is not None:
                self.peak_kib[pid] = max(hwm, self.peak_kib.get(pid, 0))
                self.roles.setdefault(pid, role(pid))
            self._count("server", pid, first=first)
        backends = self._backends()
        self.peak_backends = max(self.peak_backends, len(backends))
        for pid in backends:
            self._count("postgres", pid, first=first)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def __enter__(self) -> Sampler:
        self._machine = busy_and_total_ticks(Path("/proc/stat").read_text())
        self._client = resource.getrusage(resource.RUSAGE_SELF)
        self._started_at = time.monotonic()
        self.sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self._database.close()
        self.seconds = time.monotonic() - self._started_at
        client = resource.getrusage(resource.RUSAGE_SELF)
        busy, _ = busy_and_total_ticks(Path("/proc/stat").read_text())
        self.cpu_seconds = {
            "client": client.ru_utime
            + client.ru_stime
            - self._client.ru_utime
            - self._client.ru_stime,
            **{
                kind: sum(last - start for start, last in pids.values()) / CLOCK_TICKS
                for kind, pids in self._ticks.items()
            },
            "machine": (busy - self._machine[0]) / CLOCK_TICKS,
        }


class Stats:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.transport_errors: Counter[str] = Counter()
        self.samples: list[str] = []
        self.items_appended = 0

    def record(self, endpoint: str, seconds: float, response: httpx.Response) -> None:
        self.latencies[endpoint].append(seconds)
        self.statuses[(endpoint, response.status_code)] += 1
        if not response.is_success and len(self.samples) < 5:
            self.samples.append(f"{endpoint} {response.status_code} {response.text[:300]}")


async def call(
    client: httpx.AsyncClient, stats: Stats, endpoint: str, method: str, url: str, body: Any
) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        response = await client.request(method, url, json=body)
    except httpx.HTTPError as exc:
        stats.transport_errors[f"{endpoint} {type(exc).__name__}"] += 1
        return None
    stats.record(endpoint, time.perf_counter() - started, response)
    return response


async def agent(
    number: int,
    base: str,
    trajectories: list[list[dict[str, Any]]],
    deadline: float,
    stats: Stats,
) -> None:
    rng = random.Random(number)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for run in range(10**6):
            items = trajectories[(number + run) % len(trajectories)]
            session_id = f"load-{number}-{run}"
            created = await call(
                client, stats, "POST /sessions", "POST", "/sessions", {"session_id": session_id}
            )
            if created is None or not created.is_success:
                return
            position, turn = 0, 0
            while position < len(items):
                if time.monotonic() >= deadline:
                    return
                batch = items[position : position + rng.randint(1, 5)]
                position += len(batch)
                turn += 1
                appended = await call(
                    client,
                    stats,
                    "POST /sessions/{id}/items",
                    "POST",
                    f"/sessions/{session_id}/items",
                    {"items": batch, "unit": f"agent-{number % 4}", "phase": "load"},
                )
                if appended is not None and appended.is_success:
                    stats.items_appended += len(batch)
                await call(
                    client, stats, "POST /assemble", "POST", "/assemble", {"session_id": session_id}
                )
                start = rng.randrange(max(1, len(items) - NORMALIZE_WINDOW))
                await call(
                    client,
                    stats,
                    "POST /history/normalize",
                    "POST",
                    "/history/normalize",
                    {"items": items[start : start + NORMALIZE_WINDOW]},
                )
                if turn % COMPACT_EVERY == 0:
                    await call(
                        client,
                        stats,
                        "POST /compact",
                        "POST",
                        "/compact",
                        {
                            "session_id": session_id,
                            "strategy": "clear_tool_results",
                            "params": {"keep_recent": 3},
                        },
                    )


async def drive(
    bases: Sequence[str], trajectories: list[list[dict[str, Any]]], *, clients: int, seconds: float
) -> tuple[Stats, float]:
    stats = Stats()
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(
        *(agent(n, bases[n % len(bases)], trajectories, deadline, stats) for n in range(clients))
    )
    return stats, time.monotonic() - started


def database_sizes(database_url: str) -> tuple[dict[str, int], dict[str, int]]:
    """`pg_database_size` and each sized table's total size (heap, TOAST and indexes, of every
    partition), and each sized table's rows."""
    tables = [sql.Identifier(name) for name in SIZED_TABLES]
    # A partitioned table has no storage of its own: its size is its partitions'.
    query = sql.SQL("SELECT pg_database_size(current_database()), {sizes}, {counts}").format(
        sizes=sql.SQL(", ").join(
            sql.SQL(
                "coalesce((SELECT sum(pg_total_relation_size(relid))::bigint"
                " FROM pg_partition_tree({name})), pg_total_relation_size({name}))"
            ).format(name=sql.Literal(name))
            for name in SIZED_TABLES
        ),
        counts=sql.SQL(", ").join(
            sql.SQL("(SELECT count(*) FROM {})").format(table) for table in tables
        ),
    )
    with psycopg.connect(libpq(database_url)) as db:
        row = db.execute(query).fetchone()
    assert row is not None
    values = [int(value) for value in row]
    return (
        dict(zip(("database", *SIZED_TABLES), values[: len(SIZED_TABLES) + 1], strict=True)),
        dict(zip(SIZED_TABLES, values[len(SIZED_TABLES) + 1 :], strict=True)),
    )


@dataclass(frozen=True)
class Run:
    """What one run of one configuration measured."""

    replicas: int
    workers: int
    seconds: float
    requests: dict[str, int]
    p50_ms: dict[str, float]
    p99_ms: dict[str, float]
    errors: int
    sessions: int
    items: int
    grown_bytes: dict[str, int]
    """What the database and each sized table grew by during the run."""
    rows: dict[str, int]
    """Each sized table's rows after the run."""
    peak_rss_mib: float
    cpu_cores: dict[str, float]
    """CPU seconds per wall second: `client`, `server`, `postgres`, `machine`."""
    peak_backends: int

    @property
    def label(self) -> str:
        return f"{self.replicas} x {self.workers}"

    @property
    def requests_per_second(self) -> float:
        return sum(self.requests.values()) / self.seconds

    @property
    def other_cores(self) -> float:
        """CPU the machine spent on anything but the load generator, the servers and the
        run's backends (other work on the machine, PostgreSQL's own processes, the kernel)."""
        cores = self.cpu_cores
        return max(0.0, cores["machine"] - cores["client"] - cores["server"] - cores["postgres"])

    def per_thousand(self, sessions: float) -> dict[str, float]:
        """Bytes grown per 1,000 `sessions`."""
        return {name: grown * 1000 / sessions for name, grown in self.grown_bytes.items()}


def median_run(runs: Sequence[Run]) -> Run:
    """One configuration's runs folded into one: each figure the median of its runs (so the
    figures of the result need not come from one run)."""
    first = runs[0]

    def median_of(field: str) -> dict[str, Any]:
        values: list[dict[str, Any]] = [getattr(run, field) for run in runs]
        keys = dict.fromkeys(key for value in values for key in value)
        return {key: statistics.median(v[key] for v in values if key in v) for key in keys}

    return Run(
        replicas=first.replicas,
        workers=first.workers,
        seconds=statistics.median(run.seconds for run in runs),
        requests=median_of("requests"),
        p50_ms=median_of("p50_ms"),
        p99_ms=median_of("p99_ms"),
        errors=sum(run.errors for run in runs),
        sessions=round(statistics.median(run.sessions for run in runs)),
        items=round(statistics.median(run.items for run in runs)),
        grown_bytes=median_of("grown_bytes"),
        rows=median_of("rows"),
        peak_rss_mib=statistics.median(run.peak_rss_mib for run in runs),
        cpu_cores=median_of("cpu_cores"),
        peak_backends=max(run.peak_backends for run in runs),
    )


def measure(
    trajectories: list[list[dict[str, Any]]],
    *,
    replicas: int,
    workers: int,
    clients: int,
    seconds: float,
) -> Run:
    with bench_database("contextd_bench_load") as url:
        before, _ = database_sizes(url)
        with contextlib.ExitStack() as servers:
            bases = [
                servers.enter_context(running_server(url, workers=workers)) for _ in range(replicas)
            ]
            with Sampler(url) as sampler:
                stats, elapsed = asyncio.run(
                    drive(bases, trajectories, clients=clients, seconds=seconds)
                )
        # Measured once the servers have stopped: every plan written after its answer is in.
        after, rows = database_sizes(url)
    print_run(stats, elapsed, sampler, replicas=replicas, workers=workers, clients=clients)
    failed = sum(n for (_, status), n in stats.statuses.items() if not 200 <= status < 300)
    return Run(
        replicas=replicas,
        workers=workers,
        seconds=elapsed,
        requests={endpoint: len(values) for endpoint, values in stats.latencies.items()},
        p50_ms={e: percentile(v, 0.5) * 1000 for e, v in stats.latencies.items()},
        p99_ms={e: percentile(v, 0.99) * 1000 for e, v in stats.latencies.items()},
        errors=failed + sum(stats.transport_errors.values()),
        sessions=stats.statuses[("POST /sessions", 201)],
        items=stats.items_appended,
        grown_bytes={name: after[name] - before[name] for name in after},
        rows=rows,
        peak_rss_mib=sum(sampler.peak_kib.values()) / 1024,
        cpu_cores={kind: cpu / sampler.seconds for kind, cpu in sampler.cpu_seconds.items()},
        peak_backends=sampler.peak_backends,
    )


def print_run(
    stats: Stats, elapsed: float, sampler: Sampler, *, replicas: int, workers: int, clients: int
) -> None:
    total = sum(len(v) for v in stats.latencies.values())
    print(
        f"\n{clients} clients, {elapsed:.1f} s, {replicas} server process(es) x {workers}"
        " worker(s) on one PostgreSQL database"
    )
    print(f"throughput: {total / elapsed:8.1f} requests/s ({total} requests)")
    print(f"{'endpoint':<28} {'count':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for endpoint, values in sorted(stats.latencies.items()):
        print(
            f"{endpoint:<28} {len(values):>7} {len(values) / elapsed:>8.1f} "
            f"{percentile(values, 0.5) * 1000:>8.1f} {percentile(values, 0.99) * 1000:>8.1f}"
        )
    failed = Counter({key: n for key, n in stats.statuses.items() if not 200 <= key[1] < 300})
    print(f"errors: {sum(failed.values()) + sum(stats.transport_errors.values())}")
    for (endpoint, status), count in sorted(failed.items()):
        print(f"  {status} {endpoint}: {count}")
    for kind, count in sorted(stats.transport_errors.items()):
        print(f"  transport error {kind}: {count}")
    for sample in stats.samples:
        print(f"  e.g. {sample}")
    per_process = ", ".join(
        f"{sampler.roles[pid]} {kib / 1024:.0f}" for pid, kib in sorted(sampler.peak_kib.items())
    )
    print(
        f"server peak RSS (sum of VmHWM over {len(sampler.peak_kib)} processes): "
        f"{sum(sampler.peak_kib.values()) / 1024:.0f} MiB  [{per_process} MiB]"
    )
    cores = {kind: cpu / sampler.seconds for kind, cpu in sampler.cpu_seconds.items()}
    other = cores["machine"] - cores["client"] - cores["server"] - cores["postgres"]
    print(
        f"CPU, cores busy on average: load generator {cores['client']:.2f}, servers"
        f" {cores['server']:.2f}, PostgreSQL backends {cores['postgres']:.2f}, other"
        f" {max(other, 0):.2f}; machine {cores['machine']:.2f} of {os.cpu_count()}"
    )
    print(f"PostgreSQL backends of the run's database at most: {sampler.peak_backends}")


def print_sizes(run: Run, *, mean_run_items: float) -> None:
    whole_runs = run.items / mean_run_items
    print(
        "  rows: "
        + ", ".join(
            f"{name} {count:,.0f} ({run.grown_bytes[name] / max(count, 1):,.0f} bytes each)"
            for name, count in run.rows.items()
        )
    )
    for label, count in (("sessions created", run.sessions), ("whole runs", whole_runs)):
        sizes = run.per_thousand(count) if count else {}
        shown = ", ".join(f"{name} {size / 2**20:.1f}" for name, size in sizes.items())
        print(f"  per 1,000 {label} ({count:,.1f}): {shown} MiB")


def print_summary(runs: Sequence[Run], *, mean_run_items: float) -> None:
    configurations = sorted({(run.replicas, run.workers) for run in runs})
    medians = [
        median_run([run for run in runs if (run.replicas, run.workers) == configuration])
        for configuration in configurations
    ]
    count = len(runs) // len(configurations)
    print(f"\nmedians of {count} run(s) per configuration (replicas x workers per replica)")
    names = [name for name in ENDPOINTS if name != "POST /sessions"]
    print(
        f"{'config':<8} {'req/s':>7}  "
        + "  ".join(f"{ENDPOINTS[name] + ' p50/p99 ms':>22}" for name in names)
        + f"  {'errors':>6}  {'backends':>8}  {'RSS MiB':>7}  {'req/server CPU s':>16}"
        "  CPU load generator/servers/PostgreSQL/other"
    )
    for run in medians:
        cores = run.cpu_cores
        print(
            f"{run.label:<8} {run.requests_per_second:>7.1f}  "
            + "  ".join(
                f"{run.p50_ms.get(name, 0):>10.0f} / {run.p99_ms.get(name, 0):>7.0f}"
                for name in names
            )
            + f"  {run.errors:>6}  {run.peak_backends:>8}  {run.peak_rss_mib:>7.0f}"
            f"  {run.requests_per_second / max(cores['server'], 0.01):>16.0f}"
            f"  {cores['client']:.2f} / {cores['server']:.2f} / {cores['postgres']:.2f} /"
            f" {run.other_cores:.2f}"
        )
    print("database growth, MiB:")
    for run in medians:
        print(f"{run.label}: {run.sessions} sessions, {run.items} items appended")
        print_sizes(run, mean_run_items=mean_run_items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    trajectories = list(load_trajectories().values())
    mean_run_items = statistics.mean(len(items) for items in trajectories)
    print(f"{os.cpu_count()} CPU cores, shared by the servers, PostgreSQL and this load generator")
    configurations = list(itertools.product(args.replicas, args.workers))
    runs: list[Run] = []
    # Rounds of every configuration in turn, so that a noisy minute falls on all of them.
    for _ in range(args.repeat):
        for replicas, workers in configurations:
            run = measure(
                trajectories,
                replicas=replicas,
                workers=workers,
                clients=args.clients,
                seconds=args.seconds,
            )
            print(f"database growth, MiB ({run.items} items appended):")
            print_sizes(run, mean_run_items=mean_run_items)
            runs.append(run)
    if len(runs) > 1:
        print_summary(runs, mean_run_items=mean_run_items)
    return 1 if any(run.errors or not run.requests for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
