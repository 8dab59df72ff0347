"""Append throughput to the fact log on PostgreSQL over HTTP, against floors from the same run.

Appends every public trajectory in batches of 50 and then item by item to sessions on a real
server, from one client (httpx, as the Python client); and then item by item from one, four
and eight clients at once (their own processes and sessions) to a server of two workers. Those
clients are lean, as wrk is, so that the load generator is not what is measured: each sends
the request the Python client sends (its JSON, compact, with an idempotency key made as the
client makes one) on one keep-alive connection and reads each response whole, checking every
status. Between the batches and the rest the planner's statistics are taken (`analyze`), as
autovacuum would take them in a deployment: the log is then as large as a small one. The
floors insert the same rows with plain psycopg: one row and one commit at a time
(what one durable append per request cannot beat), from one loop and from as many loops at
once as there are clients; and all of them with `executemany` in one transaction (what a batch
cannot beat). Prints items/s for each, each HTTP rate's ratio to its floor, the server's CPU
time per item (the honest cost of an append, which other work on the machine moves less than
it moves a rate), the database backends' (the floors' and the server's connections') and the
clients' own; then whether issue 29's target is met: 1,000 appends/s one item per request,
within 1.5x of one insert-and-commit loop. That loop is bound by its commits' latency, which
moves by a third within minutes on a shared machine, so it is run again just before and just
after each HTTP run, and the best run is set against the mean of the two. Last, the CPU per
append that ratio leaves on this machine's cores against what the best run spent: the
service's appends are bound by the cores they share with PostgreSQL and the clients.
Run: `make bench` (or `.venv/bin/python -m bench.append`).
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import queue
import re
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx
import psycopg
import pydantic_core

from bench.common import (
    backend_cpu_seconds,
    bench_database,
    database_cpu_seconds,
    libpq,
    load_trajectories,
    running_server,
    server_cpu_seconds,
)

CLIENTS = (1, 4, 8)
"""Concurrent lean clients (and floor loops) per run: up to four per core of the machine the
figures come from."""
SERVER_WORKERS = 2
"""Server processes for the concurrent runs: one per core."""
TARGET_RATE = 1_000
"""Appends/s, one item per request, that issue 29 asks for."""
TARGET_RATIO = 1.5
"""The most the floor of one insert-and-commit loop may be above that rate, as issue 29 asks."""

Trajectories = dict[str, list[dict[str, Any]]]
Row = tuple[int, int, str, str, int, str, datetime]


def append_over_http(base: str, trajectories: Trajectories, *, batch: int, tag: str) -> float:
    """Items/s appended from one httpx client, `batch` items per request, each request keyed as
    the Python client keys it."""
    total = sum(len(items) for items in trajectories.values())
    with httpx.Client(base_url=base, timeout=30) as client:
        started = time.perf_counter()
        for name, items in trajectories.items():
            session_id = f"{tag}-{name}"[:200]
            client.post("/sessions", json={"session_id": session_id}).raise_for_status()
            for start in range(0, len(items), batch):
                body = {"items": items[start : start + batch], "idempotency_key": client_key()}
                client.post(f"/sessions/{session_id}/items", json=body).raise_for_status()
        elapsed = time.perf_counter() - started
    return total / elapsed


def client_key() -> str:
    """An idempotency key as the Python client makes one for a call that has none."""
    return f"ctxc-{uuid.uuid4()}"


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


def batch_floor(database_url: str, rows: list[Row]) -> float:
    """Rows/s inserted all in one `executemany`, one commit."""
    with psycopg.connect(libpq(database_url)) as connection:
        connection.execute(FLOOR_TABLE.format(table="floor_batch"))
        connection.commit()
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.executemany(INSERT.format(table="floor_batch"), rows)
        connection.commit()
        return len(rows) / (time.perf_counter() - started)


class Floor(NamedTuple):
    """Rows/s of insert-and-commit loops at once, and their backends' CPU ms per row."""

    rate: float
    database_ms: float


def analyze(database_url: str) -> str:
    """Take the planner's statistics of the bench's database, as autovacuum would once the log
    holds the batches' rows, and say whether autovacuum is on. Without statistics the append's
    prepared statement keeps a plan made for an empty log, and a lookup by idempotency key then
    reads the whole log: on a cluster with autovacuum off, a cost no deployment pays."""
    with psycopg.connect(libpq(database_url), autocommit=True) as connection:
        connection.execute("ANALYZE")
        setting = connection.execute("SHOW autovacuum").fetchone()
    return "on" if setting is None else str(setting[0])


def deal(trajectories: Trajectories, hands: int) -> list[Trajectories]:
    """The trajectories dealt into `hands`, longest first to the lightest hand, so that every
    hand holds about as many items and the concurrent runs end about together."""
    dealt: list[Trajectories] = [{} for _ in range(hands)]
    for name, items in sorted(trajectories.items(), key=lambda pair: -len(pair[1])):
        lightest = min(dealt, key=lambda hand: sum(map(len, hand.values())))
        lightest[name] = items
    return dealt


Span = tuple[float, float, float]
"""What a concurrent process reports: when it started and ended, and the CPU seconds it took (a
lean client its own; a floor loop its PostgreSQL backend's)."""


def _floor_loop(
    database_url: str, table: str, rows: list[Row], start: Barrier, report: Any
) -> None:
    with psycopg.connect(libpq(database_url)) as connection:
        backend = connection.info.backend_pid
        start.wait()
        started, cpu = time.perf_counter(), backend_cpu_seconds(backend)
        for row in rows:
            connection.execute(INSERT.format(table=table), row)
            connection.commit()
        report.put((started, time.perf_counter(), backend_cpu_seconds(backend) - cpu))


def floor_at_once(database_url: str, hands: list[list[Row]], *, tag: str = "") -> Floor:
    """Rows inserted one row and one commit at a time by as many loops at once as `hands`,
    into a table of their own (named by their number and `tag`)."""
    table = f"floor_at_once_{len(hands)}{tag}"
    with psycopg.connect(libpq(database_url)) as connection:
        connection.execute(FLOOR_TABLE.format(table=table))
        connection.commit()
    spans = at_once(_floor_loop, [(database_url, table, rows) for rows in hands])
    rows = sum(map(len, hands))
    return Floor(rows / elapsed(spans), sum(cpu for _, _, cpu in spans) * 1000 / rows)


class LeanConnection:
    """One keep-alive HTTP/1.1 connection that sends requests made beforehand and reads each
    response whole, looking at nothing but its status and its `content-length` (the service
    answers every request with one), as wrk does."""

    _LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self.host = f"{host}:{port}"
        self._socket = socket.create_connection((host, int(port)))
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()

    def post(self, path: str, body: Any) -> bytes:
        """The request the Python client sends for `body` at `path`."""
        content = pydantic_core.to_json(body)
        return (
            f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(content)}\r\n\r\n"
        ).encode() + content

    def exchange(self, request: bytes, *, expect: int) -> None:
        """Send `request` and read its response, which must have the status `expect`."""
        self._socket.sendall(request)
        buffer = self._buffer
        while (head_end := buffer.find(b"\r\n\r\n")) < 0:
            buffer += self._receive()
        head = bytes(buffer[:head_end])
        length = self._LENGTH.search(head)
        if length is None:
            raise RuntimeError(f"a response without a length: {head!r}")
        end = head_end + 4 + int(length.group(1))
        while len(buffer) < end:
            buffer += self._receive()
        status = int(head[9:12])
        if status != expect:
            raise RuntimeError(f"{status} where {expect} was expected: {bytes(buffer[:end])!r}")
        del buffer[:end]

    def _receive(self) -> bytes:
        received = self._socket.recv(65536)
        if not received:
            raise RuntimeError("the server closed the connection")
        return received

    def close(self) -> None:
        self._socket.close()


def _lean_client(base: str, hand: Trajectories, tag: str, start: Barrier, report: Any) -> None:
    connection = LeanConnection(base)
    appends = []
    for name, items in hand.items():
        session_id = f"{tag}-{name}"[:200]
        connection.exchange(connection.post("/sessions", {"session_id": session_id}), expect=201)
        path = f"/sessions/{quote(session_id, safe='')}/items"
        appends += [
            connection.post(path, {"items": [item], "idempotency_key": client_key()})
            for item in items
        ]
    connection.close()
    start.wait()
    # A new connection: the server closes one left idle (while the others got ready) too long.
    connection = LeanConnection(base)
    started, cpu = time.perf_counter(), time.process_time()
    for request in appends:
        connection.exchange(request, expect=201)
    report.put((started, time.perf_counter(), time.process_time() - cpu))
    connection.close()


def at_once(work: Callable[..., None], shares: Sequence[tuple[Any, ...]]) -> list[Span]:
    """What each process of `work` (one per share, given the share, a start barrier and a
    report queue) reported, once every one is done."""
    context = multiprocessing.get_context("spawn")
    start, report = context.Barrier(len(shares)), context.Queue()
    processes = [context.Process(target=work, args=(*share, start, report)) for share in shares]
    for process in processes:
        process.start()
    spans: list[Span] = []
    try:
        while len(spans) < len(processes):
            try:
                spans.append(report.get(timeout=1))
            except queue.Empty:
                # A process that fails reports nothing (and the others may wait for it).
                if any(process.exitcode not in (None, 0) for process in processes):
                    raise RuntimeError("a concurrent run failed") from None
    finally:
        for process in processes:
            if process.exitcode is None and len(spans) < len(processes):
                process.terminate()
            process.join()
    return spans


def elapsed(spans: Sequence[Span]) -> float:
    """Seconds from the moment every process was ready to the moment the last one was done."""
    return max(end for _, end, _ in spans) - min(begun for begun, _, _ in spans)


def main() -> None:
    trajectories = load_trajectories()
    total = sum(len(items) for items in trajectories.values())
    numbers = {name: number for number, name in enumerate(trajectories)}
    # label, items/s, floor of its own run, one loop's floor, CPU ms/item: the server, the
    # database's backends, the clients
    runs: list[tuple[str, float, float, float, float, float, float | None]] = []
    floors: dict[int, Floor] = {}
    one_loop = floor_rows(trajectories, numbers=numbers)
    one_loops: list[list[float]] = []

    def run_on(
        base: str, label: str, floor: float, rate_of: Callable[[], tuple[float, float | None]]
    ) -> None:
        # One loop's floor just before and just after the run: the machine's commit latency,
        # which bounds that loop, moves by a third within minutes here.
        around = [floor_at_once(url, [one_loop], tag=f"_{len(runs)}_before").rate]
        spent, database_spent = server_cpu_seconds(base), database_cpu_seconds(url)
        rate, client_cpu = rate_of()
        server_cpu = (server_cpu_seconds(base) - spent) * 1000 / total
        database_cpu = (database_cpu_seconds(url) - database_spent) * 1000 / total
        around.append(floor_at_once(url, [one_loop], tag=f"_{len(runs)}_after").rate)
        one_loops.append(around)
        runs.append((label, rate, floor, sum(around) / 2, server_cpu, database_cpu, client_cpu))

    def lean_clients(base: str, clients: int) -> tuple[float, float]:
        hands = [(base, hand, f"lean-{clients}") for hand in deal(trajectories, clients)]
        spans = at_once(_lean_client, hands)
        return total / elapsed(spans), sum(cpu for _, _, cpu in spans) * 1000 / total

    with bench_database("contextd_bench_append") as url:
        batch = batch_floor(url, floor_rows(trajectories, numbers=numbers))
        for clients in CLIENTS:
            hands = [floor_rows(hand, numbers=numbers) for hand in deal(trajectories, clients)]
            floors[clients] = floor_at_once(url, hands)
        with running_server(url) as base:
            run_on(
                base,
                "httpx, batches of 50",
                batch,
                lambda: (append_over_http(base, trajectories, batch=50, tag="batch50"), None),
            )
            autovacuum = analyze(url)
            run_on(
                base,
                "httpx, one item per request",
                floors[1].rate,
                lambda: (append_over_http(base, trajectories, batch=1, tag="single"), None),
            )
        with running_server(url, workers=SERVER_WORKERS) as base:
            for clients in CLIENTS:
                run_on(
                    base,
                    f"{clients} lean client{'s' if clients > 1 else ''}, {SERVER_WORKERS} workers",
                    floors[clients].rate,
                    functools.partial(lean_clients, base, clients),
                )
    print(f"items: {total} from {len(trajectories)} trajectories, {os.cpu_count()} cores")
    print(f"PostgreSQL's autovacuum: {autovacuum} (the log's statistics taken after the batches)")
    print(f"floor, psycopg executemany, one commit:   {batch:10.0f} items/s")
    for clients in CLIENTS:
        label = (
            "floor, psycopg insert and commit per row:"
            if clients == 1
            else f"floor, {clients} such loops at once:"
        )
        rate, database_ms = floors[clients]
        print(f"{label:<41} {rate:10.0f} items/s  CPU: PostgreSQL {database_ms:.2f} ms/item")
    for label, rate, floor, _, server_cpu, database_cpu, client_cpu in runs:
        clients_cpu = "" if client_cpu is None else f", clients {client_cpu:.2f} ms/item"
        print(
            f"HTTP append, {label:<30} {rate:8.0f} items/s  floor/http = {floor / rate:5.2f}x"
            f"  CPU: server {server_cpu:.2f} ms/item, PostgreSQL {database_cpu:.2f} ms/item"
            f"{clients_cpu}"
        )
    one_item = [n for n, run in enumerate(runs) if "batches" not in run[0]]
    best = max(one_item, key=lambda n: runs[n][1])
    label, rate, _, one_loop_rate, server_cpu, database_cpu, client_cpu = runs[best]
    met = rate >= TARGET_RATE and one_loop_rate / rate <= TARGET_RATIO
    before, after = one_loops[best]
    print(
        f"target ({TARGET_RATE:,} appends/s one item per request, within {TARGET_RATIO}x of one"
        f" insert-and-commit loop): {'met' if met else 'NOT met'}; best {rate:.0f} appends/s"
        f" ({label}), {one_loop_rate / rate:.2f}x one loop's {one_loop_rate:.0f} rows/s around"
        f" it ({before:.0f} before, {after:.0f} after)"
    )
    # One loop waits on its commits and leaves the cores idle; the service's appends share them
    # with PostgreSQL and the clients, so the ratio asks for at most this much CPU per append.
    cores = os.cpu_count() or 1
    asked = one_loop_rate / TARGET_RATIO
    spent = server_cpu + database_cpu + (client_cpu or 0.0)
    print(
        f"CPU per append the ratio leaves: {asked:.0f} appends/s on {cores} cores is at most"
        f" {1000 * cores / asked:.2f} ms per append, every process included; the best run spent"
        f" {spent:.2f} ms (server {server_cpu:.2f}, PostgreSQL {database_cpu:.2f})"
    )


if __name__ == "__main__":
    main()
