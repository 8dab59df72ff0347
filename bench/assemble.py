"""`/assemble` server time against the floor, on candidates built from the public trajectories.

For 50, 500 and 5,000 candidates (≈230 tokens each, counts given, as a runtime that caches its
counts sends them) the benchmark posts the same request repeatedly to a real server on
PostgreSQL, stateless and in session mode (over a short history, and over a long one: 1,378
items), and reads the server time from `Server-Timing`. The floor is what any JSON endpoint
pays for this exchange: parsing that request body and serializing a response of the same
size, timed in rounds of ten just before each round of ten requests, the modes taking turns.
Prints p50/p99, the floor, the median of the rounds' ratios, and the mean time of the plan
writes the server does after answering (its own metric), since that work is not in the server
time the caller waits for, and the total of the two against the floor; and the server's CPU
time per call (its every thread and process, read from `/proc`), all the work a call costs,
which other work on the machine moves less than it moves a time.

A second table sets the floor against what any implementation of this contract in this stack
must do for the same exchange, timed the same way (in process, in rounds just before the
requests): parse the body as the service does (orjson, and the walk that keeps it exactly as
sent), validate it (pydantic), name every candidate body by its content address (SHA-256, so a
plan stores each body once per session) and encode the answer (orjson). "left" is what issue
29's target (1.5x the floor; 1 ms over it at 50 candidates) leaves after that for everything
else a call does: the selection, placement and plan entries, the framework, the database round
trips and the plan's write.
Run: `make bench` (or `.venv/bin/python -m bench.assemble`).

`--against DIR` also serves the code of another checkout (say `git worktree add DIR HEAD~1`)
on a database of its own, migrated by that code, and sends each round's requests to both
servers in turn, the order alternating by round; "vs" is the median over rounds of this
code's p50 over the other's, "cpu vs" this code's CPU per call over the other's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.api.json_body import parse_json
from app.contract.assembly import AssembleRequest
from app.domain.addressing import address_bodies
from app.domain.items import visible_text
from app.domain.json_encoding import encode_json
from app.settings import Settings
from app.tokens import token_counter
from bench.common import (
    ROOT,
    bench_database,
    load_trajectories,
    percentile,
    running_server,
    server_cpu_seconds,
    server_ms,
)

SIZES = (50, 500, 5000)
MODES = ("stateless", "session", "long")
"""`session`: over the history of one public run (37 items); `long`: over the three longest
runs appended to one session (1,378 items, 956 KB), as a long agent session is."""
LONG_RUNS = 3
ROUND = 10
ROUNDS = {50: 20, 500: 20, 5000: 5}
"""Rounds of `ROUND` requests per row: 200 requests, 50 at 5,000 candidates."""
CHUNK_CHARS = 1600
TOTAL_RATIO = 1.5
"""All of a call's work against the floor that issue 29 asks for at 500 and 5,000 candidates."""
FIXED_COST_MS = 1.0
"""How far over the floor issue 29 asks a call at 50 candidates to stay."""


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
                "layer": "retrieval",
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


def required_once(body: bytes, answer: Any, *, max_depth: int) -> float:
    """One exchange's required work in this stack, in ms: the body parsed and kept exactly
    (`parse_json`), validated, its candidate bodies addressed, the answer encoded."""
    started = time.perf_counter()
    value = parse_json(body, max_depth=max_depth)
    AssembleRequest.model_validate(value)
    address_bodies(value)
    encode_json(answer)
    return (time.perf_counter() - started) * 1000


@dataclass(frozen=True)
class Row:
    """One size, mode and server: every server time and floor, and each round's p50 and
    ratio."""

    server: list[float]
    floor: list[float]
    required: list[float]
    """`required_once`, timed as the floor is."""
    round_p50s: list[float]
    round_ratios: list[float]
    cpu: list[float]
    """Each turn's server CPU time, ms: everything the server did for its calls, the work after
    the answers included (counted in clock ticks: sum the turns, not one)."""


def measure(clients: list[httpx.Client], body: bytes, rounds: int) -> list[Row]:
    """Rounds of ten floors, then ten requests to each client's server in turn.

    A shared VM's speed drifts by tens of percent within a minute, so each round's server
    times are set against the floors timed just before them, under the same conditions; the
    ratio reported is the median of the rounds' ratios. The floor still runs back to back, with
    warm caches, as in a tight loop. With two servers the order alternates by round. Each
    server's turn ends with a health check on its connection, which waits for the work done
    after the last answer, so that none spills into the next floor or the other's turn.
    """

    def post(client: httpx.Client) -> httpx.Response:
        response = client.post(
            "/assemble", content=body, headers={"content-type": "application/json"}
        )
        response.raise_for_status()
        return response

    # A warm-up request to each server; the floor serializes the first one's answer.
    answer, *_ = [post(client).json() for client in clients]
    max_depth = Settings().max_json_depth
    rows = [
        Row(server=[], floor=[], required=[], round_p50s=[], round_ratios=[], cpu=[])
        for _ in clients
    ]
    for n in range(rounds):
        floor = [floor_once(body, answer) for _ in range(ROUND)]
        required = [required_once(body, answer, max_depth=max_depth) for _ in range(ROUND)]
        turns = list(zip(clients, rows, strict=True))
        for client, row in turns[:: -1 if n % 2 else 1]:
            spent = server_cpu_seconds(str(client.base_url).rstrip("/"))
            server = [server_ms(post(client)) for _ in range(ROUND)]
            client.get("/healthz").raise_for_status()
            cpu = server_cpu_seconds(str(client.base_url).rstrip("/")) - spent
            row.cpu.append(cpu * 1000)
            row.server.extend(server)
            row.floor.extend(floor)
            row.required.extend(required)
            row.round_p50s.append(statistics.median(server))
            row.round_ratios.append(statistics.median(server) / statistics.median(floor))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, help="a checkout whose code is measured too")
    against: Path | None = parser.parse_args().against
    trajectories = load_trajectories()
    trajectory = next(iter(trajectories.values()))
    long_history = [
        item for run in sorted(trajectories.values(), key=len)[-LONG_RUNS:] for item in run
    ]
    codes = ["this", "against"]
    results: list[tuple[int, int, str, list[Row], list[float]]] = []
    with contextlib.ExitStack() as stack:
        sources = [ROOT] if against is None else [ROOT, against.resolve()]
        clients = []
        # Each code on a database its own migrations made: an older schema is not this one's.
        for code, source in zip(codes, sources, strict=False):
            url = stack.enter_context(
                bench_database(f"contextd_bench_assemble_{code}", source=source)
            )
            base = stack.enter_context(running_server(url, source=source))
            client = stack.enter_context(httpx.Client(base_url=base, timeout=120))
            for session_id, items in (("bench", trajectory), ("long", long_history)):
                client.post("/sessions", json={"session_id": session_id}).raise_for_status()
                for start in range(0, len(items), 100):
                    client.post(
                        f"/sessions/{session_id}/items", json={"items": items[start : start + 100]}
                    ).raise_for_status()
            clients.append(client)
        for size in SIZES:
            candidates = build_candidates(size)
            total = sum(c["tokens"] for c in candidates)
            for mode in MODES:
                request: dict[str, Any] = {
                    "sources": [{"source": "retrieval", "items": candidates}]
                }
                if mode != "stateless":
                    request["session_id"] = "bench" if mode == "session" else "long"
                stored_before = [plan_store_seconds(client) for client in clients]
                rows = measure(clients, json.dumps(request).encode(), ROUNDS[size])
                stored_after = [plan_store_seconds(client) for client in clients]
                stores = []
                for (sum_before, count_before), (sum_after, count_after) in zip(
                    stored_before, stored_after, strict=True
                ):
                    writes = count_after - count_before
                    stores.append(1000 * (sum_after - sum_before) / writes if writes else 0.0)
                results.append((size, total, mode, rows, stores))
    header = (
        *("cands", "tokens", "mode", "p50 ms", "p99 ms", "floor ms", "ratio", "store ms"),
        *("total ms", "total/fl", "over ms", "cpu ms", "cpu/fl"),
    )
    line = "{:>6} {:>8} {:<9} {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>7} {:>6}"
    line = line.format(*header)
    print(line if against is None else f"{line} {'code':<7} {'vs':>6} {'cpu vs':>6}")
    for size, total, mode, rows, stores in results:
        for code, row, store in zip(codes, rows, stores, strict=False):
            p50, p99 = statistics.median(row.server), percentile(row.server, 0.99)
            floor, ratio = statistics.median(row.floor), statistics.median(row.round_ratios)
            work, cpu = p50 + store, sum(row.cpu) / len(row.server)
            figures = (
                f"{p50:>8.2f} {p99:>8.2f} {floor:>8.2f} {ratio:>6.2f} {store:>9.2f}"
                f" {work:>9.2f} {work / floor:>8.2f} {work - floor:>8.2f}"
                f" {cpu:>7.2f} {cpu / floor:>6.2f}"
            )
            line = f"{size:>6} {total:>8} {mode:<9} {figures}"
            if against is None:
                print(line)
                continue
            versus = statistics.median(
                mine / theirs
                for mine, theirs in zip(rows[0].round_p50s, row.round_p50s, strict=True)
            )
            cpu_versus = sum(rows[0].cpu) / sum(row.cpu)
            print(f"{line} {code:<7} {versus:>6.2f} {cpu_versus:>6.2f}")
    print("ratio: the median over rounds of (the round's p50 server time / its p50 floor)")
    print("total: p50 + store, all the server's work for one call; over: total - floor")
    print("cpu: the server's CPU time per call (every thread and process of it: the answer, the")
    print("  work after it, the framework), over all rounds; cpu/fl: that over the floor")
    if against is not None:
        print("vs: the median over rounds of (this code's p50 / that row's p50);")
        print("  cpu vs: this code's CPU per call / that row's")
    print()
    line = "{:>6} {:<9} {:>8} {:>9} {:>9} {:>9} {:>7} {:>9}"
    print(
        line.format(
            "cands",
            "mode",
            *("floor ms", "needed ms", "needed/fl", "target ms"),
            *("left", "total ms"),
        )
    )
    for size, _, mode, rows, stores in results:
        row = rows[0]
        floor, needed = statistics.median(row.floor), statistics.median(row.required)
        target = floor + FIXED_COST_MS if size == min(SIZES) else TOTAL_RATIO * floor
        work = statistics.median(row.server) + stores[0]
        cells = (floor, needed, needed / floor, target, target - needed, work)
        print(line.format(size, mode, *(f"{cell:.2f}" for cell in cells)))
    print("needed: the body parsed exactly and validated, its candidate bodies addressed, the")
    print(f"  answer encoded, which no call can skip; target: issue 29's, {TOTAL_RATIO}x the floor")
    print(
        f"  ({FIXED_COST_MS:g} ms over it at {min(SIZES)} candidates); left: target - needed, for"
    )
    print("  the selection, placement, framework, database and plan write; total: as above")


if __name__ == "__main__":
    main()
