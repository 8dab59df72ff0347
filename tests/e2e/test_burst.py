"""Appends and assemblies on one session, all at once, with fewer threads and connections than
requests: every answer comes, none a 503, the log dense. Real server, real PostgreSQL.

Each session-mode assembly holds its session's turn from reading the lineage until its plan is
written after the answer; the write must never wait for a thread held by a request that waits
for that turn (or for a connection such a request holds)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import httpx

from tests.builders import user_msg
from tests.e2e.servers import running

# Four connections, four handler threads, sixteen requests: before the after-answer work had
# threads of its own, this stalled every time until the database timeout answered 503.
SMALL = {"CTX_DB_POOL_SIZE": "2", "CTX_WORKER_THREADS": "4", "CTX_DB_TIMEOUT_SECONDS": "2"}


async def _burst(base: str, sessions: list[str], pairs: int) -> list[tuple[str, int, str | None]]:
    async with httpx.AsyncClient(
        base_url=base, timeout=60, limits=httpx.Limits(max_connections=4 * pairs)
    ) as client:

        async def send(kind: str, n: int) -> tuple[str, int, str | None]:
            session_id = sessions[n % len(sessions)]
            if kind == "append":
                item = user_msg(f"item {n}")
                answer = await client.post(f"/sessions/{session_id}/items", json={"items": [item]})
            else:
                answer = await client.post("/assemble", json={"session_id": session_id})
            return kind, answer.status_code, answer.json().get("assembly_id")

        return await asyncio.gather(
            *(send(kind, n) for n in range(pairs) for kind in ("append", "assemble"))
        )


def _run(postgres_url: str, *, session_count: int, pairs: int, rounds: int) -> None:
    sessions = [f"burst-{uuid.uuid4().hex[:8]}" for _ in range(session_count)]
    with (
        running(postgres_url, workers=1, **SMALL) as server,
        httpx.Client(base_url=server.base) as client,
    ):
        for session_id in sessions:
            client.post("/sessions", json={"session_id": session_id}).raise_for_status()
        assembly_ids = []
        for _ in range(rounds):
            answers = asyncio.run(_burst(server.base, sessions, pairs))
            statuses = Counter((kind, status) for kind, status, _ in answers)
            assert statuses == {("append", 201): pairs, ("assemble", 201): pairs}
            assembly_ids += [assembly_id for _, _, assembly_id in answers if assembly_id]
        for session_id in sessions:
            page = client.get(f"/sessions/{session_id}/items", params={"limit": 1000}).json()
            appended = rounds * pairs // session_count
            assert [item["seq"] for item in page["items"]] == list(range(1, appended + 1))
        # Every answered assembly's plan was stored.
        assert len(set(assembly_ids)) == rounds * pairs
        assert {client.get(f"/assemblies/{i}").status_code for i in assembly_ids} == {200}


def test_interleaved_appends_and_assemblies_on_one_session_all_answer(postgres_url: str) -> None:
    _run(postgres_url, session_count=1, pairs=8, rounds=3)


def test_interleaved_appends_and_assemblies_on_two_sessions_all_answer(postgres_url: str) -> None:
    _run(postgres_url, session_count=2, pairs=8, rounds=3)
