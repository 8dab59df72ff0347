"""The Python client's cost per call over plain httpx, against one server in the same run.

Two calls: `GET /sessions/{id}` (a small answer) and a session-mode `POST /assemble` with 50
candidates over a 200-item history (a large one). Each is sent 200 times through plain httpx
(the body encoded by httpx, the answer decoded with `response.json()`) and 200 times through
the client (the answer read into its pydantic model), in alternating rounds of ten, so that a
shared machine's drift lands on both; sync and async alike. Prints the p50 per call of each
and their ratio. Run: `make bench` (or `.venv/bin/python -m bench.client`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.common import bench_database, load_trajectories, running_server
from contextd_client import AsyncContextdClient, ContextdClient, params

CALLS = 200
ROUND = 10
SESSION = "bench-client"


def _assemble_body() -> params.AssembleRequest:
    candidates: list[params.CandidateSpec] = [
        {
            "id": f"doc-{n}",
            "content": f"def handler_{n}(request):\n    return respond({n})\n" * 8,
            "relevance": (n % 10) / 10,
        }
        for n in range(50)
    ]
    return {"session_id": SESSION, "sources": [{"source": "notes", "items": candidates}]}


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


async def _timed_async(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def _row(label: str, raw: list[float], typed: list[float]) -> str:
    raw_p50, typed_p50 = statistics.median(raw), statistics.median(typed)
    return (
        f"| {label} | {raw_p50:.2f} | {typed_p50:.2f} | {typed_p50 - raw_p50:+.2f}"
        f" | {typed_p50 / raw_p50:.2f} |"
    )


def _sync_rows(base: str, body: params.AssembleRequest) -> list[str]:
    rows = []
    with httpx.Client(base_url=base, timeout=60) as http, ContextdClient(base) as ctx:
        calls: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
            "GET /sessions/{id}, sync": (
                lambda: http.get(f"/sessions/{SESSION}").raise_for_status().json(),
                lambda: ctx.get_session(SESSION),
            ),
            "POST /assemble, sync": (
                lambda: http.post("/assemble", json=body).raise_for_status().json(),
                lambda: ctx.assemble(**body),
            ),
        }
        for label, (raw_call, typed_call) in calls.items():
            raw: list[float] = []
            typed: list[float] = []
            for _ in range(CALLS // ROUND):
                raw += [_timed(raw_call) for _ in range(ROUND)]
                typed += [_timed(typed_call) for _ in range(ROUND)]
            rows.append(_row(label, raw, typed))
    return rows


async def _async_rows(base: str, body: params.AssembleRequest) -> list[str]:
    rows = []
    async with (
        httpx.AsyncClient(base_url=base, timeout=60) as http,
        AsyncContextdClient(base) as ctx,
    ):

        async def raw_get() -> Any:
            return (await http.get(f"/sessions/{SESSION}")).raise_for_status().json()

        async def raw_assemble() -> Any:
            return (await http.post("/assemble", json=body)).raise_for_status().json()

        calls: dict[str, tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = {
            "GET /sessions/{id}, async": (raw_get, lambda: ctx.get_session(SESSION)),
            "POST /assemble, async": (raw_assemble, lambda: ctx.assemble(**body)),
        }
        for label, (raw_call, typed_call) in calls.items():
            raw: list[float] = []
            typed: list[float] = []
            for _ in range(CALLS // ROUND):
                raw += [await _timed_async(raw_call) for _ in range(ROUND)]
                typed += [await _timed_async(typed_call) for _ in range(ROUND)]
            rows.append(_row(label, raw, typed))
    return rows


def main() -> None:
    history = next(iter(load_trajectories().values()))[:200]
    body = _assemble_body()
    with bench_database("contextd_bench_client") as url, running_server(url) as base:
        with ContextdClient(base) as ctx:
            ctx.create_session(session_id=SESSION)
            ctx.append_items(SESSION, items=history)
            answer = ctx.assemble(**body)
        print(
            f"{CALLS} calls each, rounds of {ROUND}; the assembly answers"
            f" {len(answer.model_dump_json()):,} bytes ({len(answer.plan)} plan entries)"
        )
        print("| call | httpx p50 ms | client p50 ms | overhead ms | ratio |")
        print("|---|---|---|---|---|")
        for row in _sync_rows(base, body) + asyncio.run(_async_rows(base, body)):
            print(row)


if __name__ == "__main__":
    main()
