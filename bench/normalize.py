"""Normalize throughput on the public trajectories: over HTTP and in-process, against a floor.

For each trajectory the floor is what any JSON endpoint must pay: parsing the request body and
serializing the response body (measured here, in the same run). The server time is the
`Server-Timing` the service reports for the same request. Prints per-run medians and ratios.
Run: `make bench` (or `.venv/bin/python -m bench.normalize`).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from functools import partial

import httpx

from app.domain.normalize import normalize_history
from app.tokens import token_counter
from bench.common import bench_database, load_trajectories, running_server, server_ms

REPEATS = 5


def best_of(repeats: int, action: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings) * 1000


def parse_and_serialize(body: bytes, answer: object) -> None:
    json.loads(body)
    json.dumps(answer).encode()


def main() -> None:
    trajectories = load_trajectories()
    count_tokens = token_counter("o200k_base")
    rows = []
    with bench_database("contextd_bench_normalize") as url, running_server(url) as base:
        client = httpx.Client(base_url=base, timeout=60)
        for name, items in trajectories.items():
            body = json.dumps({"items": items}).encode()
            timings = []
            for _ in range(REPEATS):
                response = client.post(
                    "/history/normalize", content=body, headers={"content-type": "application/json"}
                )
                timings.append(server_ms(response))
            answer = response.json()
            floor_ms = best_of(REPEATS, partial(parse_and_serialize, body, answer))
            core_ms = best_of(REPEATS, partial(normalize_history, items, count_tokens=count_tokens))
            rows.append((name, len(items), min(timings), core_ms, floor_ms))
        client.close()
    header = ("trajectory", "items", "server ms", "core ms", "floor ms", "ratio")
    print("{:<48} {:>5} {:>9} {:>8} {:>8} {:>6}".format(*header))
    for name, size, server, core, floor in rows:
        figures = f"{size:>5} {server:>9.2f} {core:>8.2f} {floor:>8.2f} {server / floor:>6.1f}"
        print(f"{name[:48]:<48} {figures}")
    ratios = [server / floor for _, _, server, _, floor in rows]
    print(f"median server/floor ratio: {statistics.median(ratios):.1f}x  (max {max(ratios):.1f}x)")


if __name__ == "__main__":
    main()
