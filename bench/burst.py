"""Appends and assemblies on one session, all at once: every answer, with the default pool.

Per round, `--appends` single-item appends and as many session-mode `/assemble` calls are sent
at the same moment on their own connections, interleaved (append, assemble, append, ...), on
`--sessions` sessions (each request picks one in turn). Prints, per kind, the answers by status
and the p50/p99/slowest answer times, then whether every session's log is dense (seqs 1..n).
The run fails on any answer that is not 2xx: a healthy database must never answer 503.
Run: `.venv/bin/python -m bench.burst [--rounds 3] [--appends 40] [--sessions 1]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections import Counter, defaultdict

import httpx

from bench.common import bench_database, percentile, running_server


async def _one_round(
    client: httpx.AsyncClient, sessions: list[str], appends: int, round_no: int
) -> list[tuple[str, int, float]]:
    async def send(kind: str, session_id: str, n: int) -> tuple[str, int, float]:
        started = time.monotonic()
        if kind == "append":
            item = {"type": "message", "role": "user", "content": f"round {round_no} item {n}"}
            answer = await client.post(f"/sessions/{session_id}/items", json={"items": [item]})
        else:
            answer = await client.post("/assemble", json={"session_id": session_id})
        return kind, answer.status_code, time.monotonic() - started

    calls = [
        send(kind, sessions[n % len(sessions)], n)
        for n in range(appends)
        for kind in ("append", "assemble")
    ]
    return await asyncio.gather(*calls)


async def _run(base: str, *, rounds: int, appends: int, session_count: int) -> int:
    limits = httpx.Limits(max_connections=4 * appends, max_keepalive_connections=4 * appends)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        sessions = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(session_count)]
        for session_id in sessions:
            (await client.post("/sessions", json={"session_id": session_id})).raise_for_status()
        failed = 0
        for round_no in range(rounds):
            answers = await _one_round(client, sessions, appends, round_no)
            by_kind: dict[str, list[tuple[int, float]]] = defaultdict(list)
            for kind, status, seconds in answers:
                by_kind[kind].append((status, seconds))
            for kind, got in sorted(by_kind.items()):
                statuses = Counter(status for status, _ in got)
                times = sorted(seconds for _, seconds in got)
                failed += sum(n for status, n in statuses.items() if not 200 <= status < 300)
                print(
                    f"round {round_no + 1} {kind:<8} {dict(sorted(statuses.items()))}  "
                    f"p50 {percentile(times, 0.5):.3f} s  p99 {percentile(times, 0.99):.3f} s  "
                    f"slowest {times[-1]:.3f} s"
                )
        for session_id in sessions:
            page = (await client.get(f"/sessions/{session_id}/items?limit=1000")).json()
            seqs = [item["seq"] for item in page["items"]]
            dense = seqs == list(range(1, len(seqs) + 1))
            print(f"{session_id}: {len(seqs)} facts, dense: {dense}")
            failed += not dense
        return failed


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=1)
    args = parser.parse_args(argv)
    with bench_database("contextd_bench_burst") as url, running_server(url) as base:
        failed = asyncio.run(
            _run(base, rounds=args.rounds, appends=args.appends, session_count=args.sessions)
        )
    print(f"answers not 2xx or logs not dense: {failed}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
