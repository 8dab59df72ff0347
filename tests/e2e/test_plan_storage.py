"""On PostgreSQL a plan is written after its answer is sent; a real server, real connections."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx

from tests.builders import user_msg
from tests.e2e.servers import running


def _candidates(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"doc-{n}",
            "content": f"document {n} " + "word " * 400,
            "locator": f"file://docs/{n}.txt",
            "relevance": (n % 10) / 10,
        }
        for n in range(count)
    ]


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


def test_a_plan_is_readable_by_the_next_request_on_the_same_connection(
    postgres_url: str,
) -> None:
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    body = {"session_id": session_id, "sources": [{"source": "docs", "items": _candidates(300)}]}
    with running(postgres_url) as server, httpx.Client(base_url=server.base, timeout=30) as client:
        client.post("/sessions", json={"session_id": session_id}).raise_for_status()
        client.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
        ).raise_for_status()
        before = _metric(client.get("/metrics").text, "contextd_plan_store_duration_seconds_count")
        answers = []
        for _ in range(20):
            made = client.post("/assemble", json=body)
            assert made.status_code == 201, made.text
            answer = made.json()
            answers.append(answer)
            stored = client.get(f"/assemblies/{answer['assembly_id']}")
            assert stored.status_code == 200, stored.text
            assert stored.json()["response"] == answer
            assert stored.json()["request"] == body
        after = _metric(client.get("/metrics").text, "contextd_plan_store_duration_seconds_count")
    assert after - before == 20
    assert len({a["assembly_id"] for a in answers}) == 20
    # Each call's prefix is measured against the plan stored just before it on the lineage.
    assert answers[0]["cache"]["reused_prefix_tokens"] == 0
    assert all(
        a["cache"]["reused_prefix_tokens"] == a["total_tokens"] and a["cache"]["new_tokens"] == 0
        for a in answers[1:]
    )
