"""Two real server processes that advance their own session views from different points, and a
third that has never seen the session, answer one session's assemblies alike: the per-process
state kept with a session (fold, view, advice figures, elision runs) is derived from the log,
never a second truth."""

from __future__ import annotations

import uuid

import httpx
import orjson

from tests.answers import decisions
from tests.conftest import TRAJECTORIES, load_trajectory
from tests.e2e.servers import running


def test_replicas_advancing_from_different_points_answer_alike(postgres_url: str) -> None:
    session_id = f"view-replicas-{uuid.uuid4().hex[:8]}"
    # The longest runs, one after another: calls, outputs, messages, repeated call ids.
    items = [item for path in TRAJECTORIES[2:5] for item in load_trajectory(path)]
    # A small window: the history is cut, so the answers hold dropped runs and elided ranges.
    body = {"session_id": session_id}
    with (
        running(postgres_url) as first,
        running(postgres_url) as second,
        httpx.Client(base_url=first.base, timeout=30) as a,
        httpx.Client(base_url=second.base, timeout=30) as b,
    ):
        created = a.post("/sessions", json={"session_id": session_id, "context_window": 12_000})
        assert created.status_code == 201, created.text
        compared = 0
        for step, start in enumerate(range(0, len(items), 37)):
            appended = a.post(
                f"/sessions/{session_id}/items", json={"items": items[start : start + 37]}
            )
            assert appended.status_code == 201, appended.text
            if step == 4:
                compacted = b.post("/compact", json={**body, "strategy": "clear_tool_results"})
                assert compacted.status_code in (200, 201), compacted.text
            if step == 7:  # the newest item the active history shows, with its pair
                retracted = a.post(f"/sessions/{session_id}/retractions", json={})
                assert retracted.status_code == 201, retracted.text
            # Each replica assembles on every other step only: each advances its own view from
            # points the other never saw, then both answer the same state.
            (a if step % 2 else b).post("/assemble", json=body).raise_for_status()
            if step % 3 == 2:
                on_a = a.post("/assemble", json=body)
                on_b = b.post("/assemble", json=body)
                assert on_a.status_code == on_b.status_code == 201
                assert decisions(on_a.json()) == decisions(on_b.json())
                compared += 1
        last = decisions(a.post("/assemble", json=body).json())
    assert compared >= 3
    assert orjson.loads(last)["elided"], "the window was meant to leave history out"
    # A process that has never seen the session folds the whole log: the same answer.
    with running(postgres_url) as third, httpx.Client(base_url=third.base, timeout=30) as c:
        assert decisions(c.post("/assemble", json=body).json()) == last
