"""Reading a session folds only the facts appended since the last read; the result is the same
as folding the whole log from scratch."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.storage.caches import ProcessCaches
from tests.builders import tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory


def _caches(client: TestClient) -> ProcessCaches:
    """The service's own caches: its app's, which no other app shares."""
    caches: ProcessCaches = client.app.state.caches  # type: ignore[attr-defined]
    return caches


def _views(client: TestClient, session_id: str) -> list[Any]:
    return [
        client.get(f"/sessions/{session_id}").json(),
        client.get(f"/sessions/{session_id}/history").json(),
        client.get(f"/sessions/{session_id}/compaction-advice").json(),
    ]


def test_incremental_reads_equal_a_fold_from_scratch(client: TestClient, session_id: str) -> None:
    client.post("/sessions", json={"session_id": session_id})
    steps: list[tuple[str, dict[str, Any]]] = [
        ("items", {"items": load_trajectory(TRAJECTORIES[6])[:40]}),
        ("goal", {"text": "finish the migration"}),
        ("world-state", {"sections": {"rules": "no force pushes"}}),
        ("items", {"items": [user_msg("continue"), tool_call("late"), tool_output("late", "ok")]}),
        ("compact", {"session_id": session_id, "strategy": "summary"}),
        ("items", {"items": load_trajectory(TRAJECTORIES[6])[40:60]}),
        ("world-state", {"sections": {"rules": "squash merges only"}}),
    ]
    for step, body in steps:
        if step == "compact":
            assert client.post("/compact", json=body).status_code == 201
        elif step == "items":
            assert client.post(f"/sessions/{session_id}/items", json=body).status_code == 201
        else:
            assert client.put(f"/sessions/{session_id}/{step}", json=body).status_code == 200
        incremental = _views(client, session_id)
        caches = _caches(client)
        with caches.folds_lock:
            caches.folds.clear()
        assert _views(client, session_id) == incremental


def test_the_fold_cache_is_bounded_by_the_bytes_it_holds(
    postgres_url: str, session_id: str
) -> None:
    small, large = f"{session_id}-small", f"{session_id}-large"
    big_output = "x" * 200_000
    settings = Settings(database_url=postgres_url, fold_cache_bytes=100_000)
    with TestClient(create_app(settings)) as client:
        for name, output in ((small, "ok"), (large, big_output)):
            client.post("/sessions", json={"session_id": name})
            items = [user_msg("go"), tool_call("c1"), tool_output("c1", output)]
            answer = client.post(f"/sessions/{name}/items", json={"items": items})
            assert answer.status_code == 201
        before = [_views(client, name) for name in (small, large)]
        caches = _caches(client)
        with caches.folds_lock:
            held = list(caches.folds.values())
        # The small session is kept; the large one is larger than the whole cache: served, not
        # kept, and it pushed nothing out.
        assert [fold.last_seq for fold in held] == [3]
        assert sum(fold.weight for fold in held) < 100_000
        assert [_views(client, name) for name in (small, large)] == before
