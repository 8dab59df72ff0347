"""Append throughput to the fact log on PostgreSQL over HTTP, against floors from the same run.

Appends every public trajectory item by item and in batches of 50 to sessions on a real
server, from one client, and then item by item from several clients at once (their own
processes and sessions, each append keyed as the Python client keys it, as runtimes run). The
floors insert the same rows with plain psycopg: one row and one commit at a time (what one
durable append per request cannot beat), from one loop and from as many loops at once as
there are clients; and all of them with `executemany` in one transaction (what a batch cannot
beat). Prints items/s for each, each HTTP rate's ratio to its floor, and the server's CPU
time per item (which other work on the machine moves less than it moves a rate).
Run: `make bench` (or `.venv/bin/python -m bench.append`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.common import bench_database, libpq, load_trajectories, running_server

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

CLIENTS = 4
"""Concurrent clients (and floor loops): two per core of the machine the figures come from."""
SERVER_WORKERS = 2
"""Server processes for the concurrent run: one per core."""

Trajectories = dict[str, list[dict[str, Any]]]
Row = tuple[int, int, str, str, int, str, datetime]


def append_over_http(base: str, trajectories: Trajectories, *, batch: int, tag: str) -> float:
    total = sum(len(items) for items in trajectories.values())
    with httpx.Client(base_url=base, timeout=30) as client:
        started = time.perf_counter()
        for name, items in trajectories.items():
            session_id = f"{tag}-{name}"[:200]
            client.post("/sessions", json={"session_id": session_id}).raise_for_status()
            for start in range(0, len(items), batch):
                response = client.post(
                    f"/sessions/{session_id}/items", json={"items": items[start : start + batch]}
                )
                response.raise_for_status()
        elapsed = time.perf_counter() - started
    return total / elapsed


INSERT = "INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s)"
FLOOR_TABLE = (
    "CREATE TABLE {table} (session_id bigint, seq bigint, type text, item jsonb, tokens int,"
    " provenance jsonb, recorded_at timestamptz, PRIMARY KEY (session_id, seq))"
)


def floor_rows(trajectories: Trajectories, *, numbers: dict[str, int]) -> list[Row]:
    """The rows the floors insert for `trajectories`, each session numbered by `numbers`."""
    return [
        (
            numbers[name],
            seq,
            item.get("type", "message"),
            json.dumps(item),
            0,
            "{}",
            datetime.now(UTC),
        )
        for name, items in trajectories.items()
        for seq, item in enumerate(items, start=1)
    ]


def insert_floors(database_url: str, rows: list[Row]) -> tuple[float, float]:
    """Rows/s inserted one row and one commit at a time, and all in one `executemany`."""
    rates = []
    with psycopg.connect(libpq(database_url)) as connection:
        for table in ("floor_each", "floor_batch", "floor_each_at_once"):
            connection.execute(FLOOR_TABLE.format(table=table))
        connection.commit()
        started = time.perf_counter()
        for row in rows:
            connection.execute(INSERT.format(table="floor_each"), row)
            connection.commit()
        rates.append(len(rows) / (time.perf_counter() - started))
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.executemany(INSERT.format(table="floor_batch"), rows)
        connection.commit()
        rates.append(len(rows) / (time.perf_counter() - started))
    return rates[0], rates[1]


def deal(trajectories: Trajectories, hands: int) -> list[Trajectories]:
    """The trajectories dealt into `hands`, longest first to the lightest hand, so that every
    hand holds about as many items and the concurrent runs end about together."""
    dealt: list[Trajectories] = [{} for _ in range(hands)]
    for name, items in sorted(trajectories.items(), key=lambda pair: -len(pair[1])):
        lightest = min(dealt, key=lambda hand: sum(map(len, hand.values())))
        lightest[name] = items
    return dealt


def _floor_loop(database_url: str, rows: list[Row], start: Barrier, report: Any) -> None:
    with psycopg.connect(libpq(database_url)) as connection:
        start.wait()
        started = time.perf_counter()
        for row in rows:
            connection.execute(INSERT.format(table="floor_each_at_once"), row)
            connection.commit()
        report.put((started, time.perf_counter()))


def _http_client(base: str, hand: Trajectories, start: Barrier, report: Any) -> None:
    with httpx.Client(base_url=base, timeout=30) as client:
        for name in hand:
            client.post("/sessions", json={"session_id": f"at-once-{name}"}).raise_for_status()
        start.wait()
        started = time.perf_counter()
        for name, items in hand.items():
            for item in items:
                response = client.post(
                    f"/sessions/at-once-{name}/items",
                    json={"items": [item], "idempotency_key": f"ctxc-{uuid.uuid4()}"},
                )
                response.raise_for_status()
        report.put((started, time.perf_counter()))


def at_once(work: Callable[..., None], shares: Sequence[tuple[Any, ...]]) -> float:
    """Seconds from the moment every process of `work` (one per share, given the share, a
    start barrier and a report queue) is ready to the moment the last one is done."""
    context = multiprocessing.get_context("spawn")
    start, report = context.Barrier(len(shares)), context.Queue()
    processes = [context.Process(target=work, args=(*share, start, report)) for share in shares]
    for process in processes:
        process.start()
    # A process that fails reports nothing: wait long, not forever.
    spans: list[tuple[float, float]] = [report.get(timeout=900) for _ in processes]
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise RuntimeError(f"a concurrent run failed (exit code {process.exitcode})")
    return max(end for _, end in spans) - min(begun for begun, _ in spans)


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


def main() -> None:
    trajectories = load_trajectories()
    total = sum(len(items) for items in trajectories.values())
    hands = deal(trajectories, CLIENTS)
    numbers = {name: number for number, name in enumerate(trajectories)}
    runs: list[tuple[str, float, float, float]] = []  # label, items/s, its floor, CPU ms/item

    def run_on(base: str, label: str, floor: float, rate_of: Callable[[], float]) -> None:
        spent = server_cpu_seconds(base)
        rate = rate_of()
        runs.append((label, rate, floor, (server_cpu_seconds(base) - spent) * 1000 / total))

    with bench_database("contextd_bench_append") as url:
        each, batch = insert_floors(url, floor_rows(trajectories, numbers=numbers))
        loops = [(url, floor_rows(hand, numbers=numbers)) for hand in hands]
        each_at_once = total / at_once(_floor_loop, loops)
        with running_server(url) as base:
            run_on(
                base,
                "one item per request",
                each,
                lambda: append_over_http(base, trajectories, batch=1, tag="single"),
            )
            run_on(
                base,
                "batches of 50",
                batch,
                lambda: append_over_http(base, trajectories, batch=50, tag="batch50"),
            )
        with running_server(url, workers=SERVER_WORKERS) as base:
            run_on(
                base,
                f"{CLIENTS} clients, 1 item, {SERVER_WORKERS} workers",
                each_at_once,
                lambda: total / at_once(_http_client, [(base, hand) for hand in hands]),
            )
    print(f"items: {total} from {len(trajectories)} trajectories")
    print(f"floor, psycopg insert and commit per row:  {each:10.0f} items/s")
    print(f"floor, psycopg executemany, one commit:    {batch:10.0f} items/s")
    print(f"floor, {CLIENTS} such loops at once:            {each_at_once:10.0f} items/s")
    for label, rate, floor, cpu_ms in runs:
        print(
            f"HTTP append, {label:<28} {rate:10.0f} items/s  floor/http = {floor / rate:.2f}x"
            f"  server CPU {cpu_ms:.2f} ms/item"
        )


if __name__ == "__main__":
    main()
