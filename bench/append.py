"""Append throughput to the fact log on PostgreSQL over HTTP, against floors from the same run.

Appends every public trajectory item by item and in batches of 50 to sessions on a real
server. The floors insert the same rows with plain psycopg: one row and one commit at a time
(what one durable append per request cannot beat), and all of them with `executemany` in one
transaction (what a batch cannot beat). Prints items/s for each and each HTTP rate's ratio to
its floor.
Run: `make bench` (or `.venv/bin/python -m bench.append`).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx
import psycopg

from bench.common import bench_database, libpq, load_trajectories, running_server


def append_over_http(
    base: str, trajectories: dict[str, list[dict[str, object]]], *, batch: int, tag: str
) -> float:
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


def insert_floors(
    database_url: str, trajectories: dict[str, list[dict[str, object]]]
) -> tuple[float, float]:
    """Rows/s inserted one row and one commit at a time, and all in one `executemany`."""
    rows = [
        (session, seq, item.get("type", "message"), json.dumps(item), 0, "{}", datetime.now(UTC))
        for session, items in enumerate(trajectories.values())
        for seq, item in enumerate(items, start=1)
    ]
    rates = []
    with psycopg.connect(libpq(database_url)) as connection:
        for table in ("floor_each", "floor_batch"):
            connection.execute(
                f"CREATE TABLE {table} (session_id bigint, seq bigint, type text, item jsonb,"
                " tokens int, provenance jsonb, recorded_at timestamptz,"
                " PRIMARY KEY (session_id, seq))"
            )
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


def main() -> None:
    trajectories = load_trajectories()
    total = sum(len(items) for items in trajectories.values())
    with bench_database("contextd_bench_append") as url:
        each, batch = insert_floors(url, trajectories)
        with running_server(url) as base:
            single = append_over_http(base, trajectories, batch=1, tag="single")
            batched = append_over_http(base, trajectories, batch=50, tag="batch50")
    print(f"items: {total} from {len(trajectories)} trajectories")
    print(f"floor, psycopg insert and commit per row:  {each:10.0f} items/s")
    print(f"floor, psycopg executemany, one commit:    {batch:10.0f} items/s")
    for label, rate, floor in (
        ("one item per request", single, each),
        ("batches of 50", batched, batch),
    ):
        print(f"HTTP append, {label:<28} {rate:10.0f} items/s  floor/http = {floor / rate:.2f}x")


if __name__ == "__main__":
    main()
