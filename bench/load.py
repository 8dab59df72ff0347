"""A realistic mix from many concurrent clients against a two-worker server on PostgreSQL.

Each client (an asyncio task with its own HTTP connection) plays an agent over one of the
public trajectories: it appends the next 1–5 items to its session, assembles the context in
session mode, normalizes a slice of the trajectory statelessly and, every few turns, compacts
with `clear_tool_results`. When its trajectory is exhausted it starts a new session on the next.
Prints throughput, p50/p99 latency per endpoint, non-2xx answers by status (the run fails on
any) and the peak RSS of the server (VmHWM of the uvicorn supervisor and its workers).
Run: `.venv/bin/python -m bench.load [--seconds 20] [--clients 32]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

from bench.common import bench_database, load_trajectories, percentile, running_server

NORMALIZE_WINDOW = 40
COMPACT_EVERY = 8


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def server_processes() -> list[int]:
    """Every descendant of this process: the server started by `running_server` and its
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
        ("app.cli", "supervisor"),
        ("resource_tracker", "resource tracker"),
        ("spawn_main", "worker"),
    ):
        if needle in command:
            return name
    return command.split(" ", 1)[0]


class PeakRss:
    """Samples VmHWM (the kernel's own peak) of the server processes until stopped."""

    def __init__(self) -> None:
        self.peak_kib: dict[int, int] = {}
        self.roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for pid in server_processes():
            hwm = vm_hwm_kib(pid)
            if hwm is not None:
                self.peak_kib[pid] = max(hwm, self.peak_kib.get(pid, 0))
                self.roles.setdefault(pid, role(pid))

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


class Stats:
    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.transport_errors: Counter[str] = Counter()
        self.samples: list[str] = []

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
                await call(
                    client,
                    stats,
                    "POST /sessions/{id}/items",
                    "POST",
                    f"/sessions/{session_id}/items",
                    {"items": batch, "unit": f"agent-{number % 4}", "phase": "load"},
                )
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


async def drive(base: str, *, clients: int, seconds: float) -> tuple[Stats, float]:
    trajectories = list(load_trajectories().values())
    stats = Stats()
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(agent(n, base, trajectories, deadline, stats) for n in range(clients)))
    return stats, time.monotonic() - started


def report(stats: Stats, elapsed: float, peak: PeakRss, *, clients: int) -> int:
    total = sum(len(v) for v in stats.latencies.values())
    print(f"{clients} clients, {elapsed:.1f} s, 2 server workers on PostgreSQL")
    print(f"throughput: {total / elapsed:8.1f} requests/s ({total} requests)")
    print(f"{'endpoint':<28} {'count':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for endpoint, values in sorted(stats.latencies.items()):
        print(
            f"{endpoint:<28} {len(values):>7} {len(values) / elapsed:>8.1f} "
            f"{percentile(values, 0.5) * 1000:>8.1f} {percentile(values, 0.99) * 1000:>8.1f}"
        )
    failed = Counter({key: n for key, n in stats.statuses.items() if not 200 <= key[1] < 300})
    errors = sum(failed.values()) + sum(stats.transport_errors.values())
    print(f"errors: {errors}")
    for (endpoint, status), count in sorted(failed.items()):
        print(f"  {status} {endpoint}: {count}")
    for kind, count in sorted(stats.transport_errors.items()):
        print(f"  transport error {kind}: {count}")
    for sample in stats.samples:
        print(f"  e.g. {sample}")
    total_kib = sum(peak.peak_kib.values())
    per_process = ", ".join(
        f"{peak.roles[pid]} {kib / 1024:.0f}" for pid, kib in sorted(peak.peak_kib.items())
    )
    print(
        f"server peak RSS (sum of VmHWM over {len(peak.peak_kib)} processes): "
        f"{total_kib / 1024:.0f} MiB  [{per_process} MiB]"
    )
    return 1 if errors or total == 0 else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args(argv)
    with (
        bench_database("contextd_bench_load") as url,
        running_server(url, workers=2) as base,
        PeakRss() as peak,
    ):
        stats, elapsed = asyncio.run(drive(base, clients=args.clients, seconds=args.seconds))
    return report(stats, elapsed, peak, clients=args.clients)


if __name__ == "__main__":
    sys.exit(main())
