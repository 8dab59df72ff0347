"""`/assemble` server time against the floor, on candidates built from the public trajectories.

For 50, 500 and 5,000 candidates (≈230 tokens each, counts given, as a runtime that caches its
counts sends them) the benchmark posts the same request repeatedly to a real server on
PostgreSQL, stateless and in session mode, and reads the server time from `Server-Timing`.
The floor is what any JSON endpoint pays for this exchange: parsing that request body and
serializing a response of the same size, timed in rounds of ten just before each round of ten
requests, the two modes taking turns. Prints p50/p99, the floor, the median of the rounds'
ratios, and the mean time of the plan writes the server does after answering (its own metric),
since that work is not in the server time the caller waits for.
Run: `make bench` (or `.venv/bin/python -m bench.assemble`).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

import httpx

from app.domain.items import visible_text
from app.tokens import token_counter
from bench.common import (
    bench_database,
    load_trajectories,
    percentile,
    running_server,
    server_ms,
)

SIZES = (50, 500, 5000)
MODES = ("stateless", "session")
ROUND = 10
ROUNDS = {50: 20, 500: 20, 5000: 5}
"""Rounds of `ROUND` requests per row: 200 requests, 50 at 5,000 candidates."""
CHUNK_CHARS = 1600


def build_candidates(count: int) -> list[dict[str, Any]]:
    count_tokens = token_counter("o200k_base")
    texts = [
        visible_text(item)
        for items in load_trajectories().values()
        for item in items
        if len(visible_text(item)) > 200
    ]
    chunks = [text[i : i + CHUNK_CHARS] for text in texts for i in range(0, len(text), CHUNK_CHARS)]
    candidates = []
    for n in range(count):
        content = chunks[n % len(chunks)] + f"\n[chunk {n}]"
        candidates.append(
            {
                "id": f"doc-{n}",
                "content": content,
                "locator": f"file://corpus/doc-{n}.txt",
                "relevance": round((n * 37 % 100) / 100, 2),
                "priority": 0.5,
                "trust": 0.8,
                "freshness": 0.5,
                "tokens": count_tokens(content),
            }
        )
    return candidates


def plan_store_seconds(client: httpx.Client) -> tuple[float, float]:
    """(sum, count) of the plan writes done after answering, from the server's own metrics."""
    text = client.get("/metrics").text
    found = dict(
        re.findall(r"^contextd_plan_store_duration_seconds_(sum|count) (\S+)$", text, re.M)
    )
    return float(found.get("sum", 0)), float(found.get("count", 0))


def floor_once(body: bytes, answer: Any) -> float:
    """One exchange's floor, in ms: parse the request, serialize the answer."""
    started = time.perf_counter()
    json.loads(body)
    json.dumps(answer).encode()
    return (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class Row:
    """One size and mode: every server time and floor, and each round's ratio."""

    server: list[float]
    floor: list[float]
    round_ratios: list[float]


def measure(client: httpx.Client, body: bytes, rounds: int) -> Row:
    """Rounds of ten floors, then ten requests.

    A shared VM's speed drifts by tens of percent within a minute, so each round's server
    times are set against the floors timed just before them, under the same conditions; the
    ratio reported is the median of the rounds' ratios. The floor still runs back to back, with
    warm caches, as in a tight loop.
    """

    def post() -> httpx.Response:
        response = client.post(
            "/assemble", content=body, headers={"content-type": "application/json"}
        )
        response.raise_for_status()
        return response

    answer = post().json()
    row = Row(server=[], floor=[], round_ratios=[])
    for _ in range(rounds):
        floor = [floor_once(body, answer) for _ in range(ROUND)]
        server = [server_ms(post()) for _ in range(ROUND)]
        row.server.extend(server)
        row.floor.extend(floor)
        row.round_ratios.append(statistics.median(server) / statistics.median(floor))
    return row


def main() -> None:
    trajectory = next(iter(load_trajectories().values()))
    results: list[tuple[int, int, str, Row, float]] = []
    with bench_database("contextd_bench_assemble") as url, running_server(url) as base:
        client = httpx.Client(base_url=base, timeout=120)
        client.post("/sessions", json={"session_id": "bench"}).raise_for_status()
        client.post("/sessions/bench/items", json={"items": trajectory}).raise_for_status()
        for size in SIZES:
            candidates = build_candidates(size)
            total = sum(c["tokens"] for c in candidates)
            for mode in MODES:
                request: dict[str, Any] = {
                    "sources": [{"source": "retrieval", "items": candidates}]
                }
                if mode == "session":
                    request["session_id"] = "bench"
                stored_before = plan_store_seconds(client)
                row = measure(client, json.dumps(request).encode(), ROUNDS[size])
                stored_after = plan_store_seconds(client)
                writes = stored_after[1] - stored_before[1]
                store = 1000 * (stored_after[0] - stored_before[0]) / writes if writes else 0.0
                results.append((size, total, mode, row, store))
        client.close()
    header = ("cands", "tokens", "mode", "p50 ms", "p99 ms", "floor ms", "ratio", "store ms")
    print("{:>6} {:>8} {:<9} {:>8} {:>8} {:>8} {:>6} {:>9}".format(*header))
    for size, total, mode, row, store in results:
        p50, p99 = statistics.median(row.server), percentile(row.server, 0.99)
        floor, ratio = statistics.median(row.floor), statistics.median(row.round_ratios)
        figures = f"{p50:>8.2f} {p99:>8.2f} {floor:>8.2f} {ratio:>6.2f} {store:>9.2f}"
        print(f"{size:>6} {total:>8} {mode:<9} {figures}")
    print("ratio: the median over rounds of (the round's p50 server time / its p50 floor)")


if __name__ == "__main__":
    main()
