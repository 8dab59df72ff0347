"""Retraction and reset over HTTP on PostgreSQL: the active history changes, the raw log keeps
everything, pairing holds, and bad requests change nothing."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.domain.normalize import find_pairing_violations
from tests.builders import assistant_msg, tool_call, tool_output, user_msg


def _session(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _history(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(f"/sessions/{session_id}/history").json()["items"]
    return items


ITEMS = [
    user_msg("list the files"),
    tool_call("c1", "shell", '{"cmd":"ls"}'),
    tool_output("c1", "a.py"),
    assistant_msg("There is a.py."),
    user_msg("thanks"),
]


def test_a_retraction_hides_the_item_and_its_pair(client: TestClient, session_id: str) -> None:
    _session(client, session_id, ITEMS)
    retracted = client.post(f"/sessions/{session_id}/retractions", json={"seq": 3})
    assert (retracted.status_code, retracted.json()) == (
        201,
        {
            "seq": 6,
            "retracted": [2, 3],
            "items": [{"seq": 2, "item": ITEMS[1]}, {"seq": 3, "item": ITEMS[2]}],
        },
    )
    history = _history(client, session_id)
    assert history == [ITEMS[0], ITEMS[3], ITEMS[4]]
    assert find_pairing_violations(history) == []
    # The raw log keeps every item and shows the retraction as a fact.
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [entry["item"] for entry in logged[:5]] == ITEMS
    assert logged[5]["item"] == {"type": "contextd.retraction", "seqs": [2, 3], "requested": 3}
    # The last message goes, as a framework's pop_item asks.
    popped = client.post(f"/sessions/{session_id}/retractions", json={"seq": 5})
    assert popped.json() == {"seq": 7, "retracted": [5], "items": [{"seq": 5, "item": ITEMS[4]}]}
    assert _history(client, session_id) == [ITEMS[0], ITEMS[3]]


def test_a_retraction_without_a_seq_pops_the_newest_shown_item(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, ITEMS[:3])
    # The newest item is an output: its call goes with it, and both come back as logged.
    popped = client.post(f"/sessions/{session_id}/retractions", json={})
    assert (popped.status_code, popped.json()) == (
        201,
        {
            "seq": 4,
            "retracted": [2, 3],
            "items": [{"seq": 2, "item": ITEMS[1]}, {"seq": 3, "item": ITEMS[2]}],
        },
    )
    # The retraction fact itself is never "the newest item": the next pop takes seq 1.
    again = client.post(f"/sessions/{session_id}/retractions", json={"seq": None})
    assert again.json() == {"seq": 5, "retracted": [1], "items": [{"seq": 1, "item": ITEMS[0]}]}
    assert _history(client, session_id) == []
    before = client.get(f"/sessions/{session_id}").json()["last_seq"]
    empty = client.post(f"/sessions/{session_id}/retractions", json={})
    assert (empty.status_code, empty.json()) == (
        409,
        {
            "error": {
                "code": "nothing_to_retract",
                "message": "the active history shows no logged item to retract",
                "details": None,
            }
        },
    )
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == before


def test_bad_retractions_are_refused_and_change_nothing(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, ITEMS)
    assert client.post(f"/sessions/{session_id}/retractions", json={"seq": 2}).status_code == 201
    before = client.get(f"/sessions/{session_id}").json()["last_seq"]
    missing = client.post(f"/sessions/{session_id}/retractions", json={"seq": 99})
    again = client.post(f"/sessions/{session_id}/retractions", json={"seq": 2})
    paired = client.post(f"/sessions/{session_id}/retractions", json={"seq": 3})
    bookkeeping = client.post(f"/sessions/{session_id}/retractions", json={"seq": 6})
    nowhere = client.post("/sessions/no-such-session/retractions", json={"seq": 1})
    assert [r.status_code for r in (missing, again, paired, bookkeeping, nowhere)] == [
        409,
        409,
        409,
        409,
        404,
    ]
    assert [r.json()["error"]["code"] for r in (missing, again, paired, bookkeeping)] == [
        "not_in_active_history",
        "already_retracted",
        "already_retracted",
        "not_in_active_history",
    ]
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == before


def test_a_reset_starts_the_active_history_empty(client: TestClient, session_id: str) -> None:
    _session(client, session_id, ITEMS)
    client.put(f"/sessions/{session_id}/goal", json={"text": "Ship the fix."})
    reset = client.post(f"/sessions/{session_id}/reset")
    assert (reset.status_code, reset.json()) == (201, {"seq": 7})
    assert _history(client, session_id) == []
    later = user_msg("start over")
    client.post(f"/sessions/{session_id}/items", json={"items": [later]})
    assert _history(client, session_id) == [later]
    # The goal stays pinned; the log keeps all.
    assembled = client.post("/assemble", json={"session_id": session_id}).json()
    assert [item["id"] for item in assembled["items"]] == ["goal", "history:0"]
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [entry["item"] for entry in logged[:5]] == ITEMS
    assert logged[6]["item"] == {"type": "contextd.reset"}
    # Retracting what the reset hid is a conflict, not a silent no-op.
    hidden = client.post(f"/sessions/{session_id}/retractions", json={"seq": 1})
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (409, "not_in_active_history")
