"""Reading a long session: a 10,000-item log built from the public trajectories, on PostgreSQL.

Prints the best-of-5 server time (`Server-Timing`) of reading the raw log page, the session
summary, the normalized active history and a session-mode assembly. Reads after the first fold
only the facts appended since (each process keeps the newest fold per session).
Run: `make bench` (or `.venv/bin/python -m bench.history`).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from bench.common import bench_database, load_trajectories, running_server, server_ms

ITEMS = 10_000
BATCH = 500


def main() -> None:
    pool = [item for items in load_trajectories().values() for item in items]
    items = (pool * (ITEMS // len(pool) + 1))[:ITEMS]
    with bench_database("contextd_bench_history") as url, running_server(url) as base:
        client = httpx.Client(base_url=base, timeout=120)
        client.post("/sessions", json={"session_id": "long"}).raise_for_status()
        for start in range(0, ITEMS, BATCH):
            batch = {"items": items[start : start + BATCH]}
            client.post("/sessions/long/items", json=batch).raise_for_status()
        reads: dict[str, Callable[[], httpx.Response]] = {
            "GET /sessions/long/items?limit=1000": lambda: client.get(
                "/sessions/long/items", params={"limit": 1000}
            ),
            "GET /sessions/long": lambda: client.get("/sessions/long"),
            "GET /sessions/long/history": lambda: client.get("/sessions/long/history"),
            "POST /assemble (session)": lambda: client.post(
                "/assemble", json={"session_id": "long"}
            ),
        }
        print(f"session of {ITEMS} items ({sum(len(str(i)) for i in items):,} characters)")
        for label, read in reads.items():
            best = min(server_ms(read()) for _ in range(5))
            print(f"{label:<40} {best:8.1f} ms")
        client.close()


if __name__ == "__main__":
    main()
