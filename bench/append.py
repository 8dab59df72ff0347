"""Append throughput to the fact log on PostgreSQL over HTTP, against a floor from the same run.

Appends every public trajectory item by item and in batches of 50 to sessions on a real
server, then inserts the same rows with plain psycopg `executemany` in one transaction (the
floor). Prints items/s for each and the ratio floor/HTTP.
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


def insert_floor(database_url: str, trajectories: dict[str, list[dict[str, object]]]) -> float:
    rows = [
        (session, seq, item.get("type", "message"), json.dumps(item), 0, "{}", datetime.now(UTC))
        for session, items in enumerate(trajectories.values())
        for seq, item in enumerate(items, start=1)
    ]
    with psycopg.connect(libpq(database_url)) as connection:
        connection.execute(
            "CREATE TEMP TABLE floor_facts (session_id bigint, seq bigint, type text, item jsonb,"
            " tokens int, provenance jsonb, recorded_at timestamptz, PRIMARY KEY (session_id, seq))"
        )
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO floor_facts VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
        connection.commit()
        elapsed = time.perf_counter() - started
    return len(rows) / elapsed


def main() -> None:
    trajectories = load_trajectories()
    total = sum(len(items) for items in trajectories.values())
    with bench_database("contextd_bench_append") as url:
        floor = insert_floor(url, trajectories)
        with running_server(url) as base:
            single = append_over_http(base, trajectories, batch=1, tag="single")
            batched = append_over_http(base, trajectories, batch=50, tag="batch50")
    print(f"items: {total} from {len(trajectories)} trajectories")
    print(f"floor (psycopg executemany, one transaction): {floor:10.0f} items/s")
    for label, rate in (("one item per request", single), ("batches of 50", batched)):
        print(f"HTTP append, {label:<33} {rate:10.0f} items/s  floor/http = {floor / rate:.1f}x")


if __name__ == "__main__":
    main()
