"""Issue 44 item 1: every prefix break named. A session-mode `/assemble` whose reused prefix ends
before the previous assembly's history did says where (`cache.break`: position, item, the fact
seq it stands for) and why, one cause of a closed list; one that reuses the whole previous
history says nothing. Each cause is forced alone here, over HTTP on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from app.cli import render_plan
from tests.builders import tool_call, tool_output, user_msg

GOAL = "Fix the date parser in utils/dates.py."


def _append(client: TestClient, session_id: str, *items: dict[str, Any]) -> None:
    answer = client.post(f"/sessions/{session_id}/items", json={"items": list(items)})
    assert answer.status_code == 201, answer.text


def _turn(n: int, output: str = "ok") -> tuple[dict[str, Any], dict[str, Any]]:
    arguments = json.dumps({"command": f"pytest -k case{n}"})
    return tool_call(f"c{n}", "shell", arguments), tool_output(f"c{n}", output)


def _session(client: TestClient, session_id: str, **settings: Any) -> None:
    assert client.post("/sessions", json={"session_id": session_id, **settings}).status_code == 201
    client.put(f"/sessions/{session_id}/goal", json={"text": GOAL}).raise_for_status()
    client.put(
        f"/sessions/{session_id}/world-state", json={"sections": {"rules": "Never push to main."}}
    ).raise_for_status()
    _append(client, session_id, user_msg("the parser drops the timezone"), *_turn(0))


def _assemble(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, **body})
    assert answer.status_code == 201, answer.text
    cache: dict[str, Any] = answer.json()["cache"]
    return cache


def _broken_by(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    cache = _assemble(client, session_id, **body)
    assert cache["break"] is not None, cache
    assert cache["break"]["position"] == cache["reused_prefix_items"]
    brk: dict[str, Any] = cache["break"]
    return brk


def test_a_call_that_reuses_the_previous_history_names_no_break(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    first = _assemble(client, session_id)
    assert first["break"] is None  # nothing to compare with
    _append(client, session_id, *_turn(1))
    again = _assemble(client, session_id)
    assert again["break"] is None
    assert again["reused_prefix_items"] > 0


def test_a_goal_change_is_named(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    _assemble(client, session_id)
    client.put(f"/sessions/{session_id}/goal", json={"text": "Fix it and add a test."})
    brk = _broken_by(client, session_id)
    assert brk == {
        "position": 0,
        "item_id": "goal",
        "seq": None,
        "cause": "goal",
        "detail": "the goal changed (version 1 to 2)",
    }


def test_a_governing_world_state_change_is_named(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    _assemble(client, session_id)
    client.put(
        f"/sessions/{session_id}/world-state",
        json={"sections": {"rules": "Never push to main. Run the suite first."}},
    ).raise_for_status()
    brk = _broken_by(client, session_id)
    assert (brk["item_id"], brk["cause"]) == ("world_state:rules", "world_state")


def _compact(client: TestClient, session_id: str) -> str:
    compacted = client.post(
        "/compact",
        json={"session_id": session_id, "strategy": "truncate", "params": {"target_tokens": 800}},
    )
    assert compacted.status_code == 201, compacted.text
    compaction_id: str = compacted.json()["compaction_id"]
    return compaction_id


def test_a_compaction_is_named(client: TestClient, session_id: str) -> None:
    """Whether the runtime compacts after its call (its output appended since) or before it
    (the assembly that advised it superseded, never sent), the break is the compaction's,
    against the call the provider last saw."""
    _session(client, session_id)
    _append(client, session_id, *[item for n in range(1, 12) for item in _turn(n, "x " * 300)])
    _assemble(client, session_id)
    _append(client, session_id, *_turn(12))
    compaction_id = _compact(client, session_id)
    brk = _broken_by(client, session_id)
    assert brk["cause"] == "compaction"
    assert brk["detail"].startswith(f"compaction {compaction_id} rewrote")

    _append(client, session_id, *[item for n in range(13, 24) for item in _turn(n, "x " * 300)])
    sent = _assemble(client, session_id)
    _append(client, session_id, *_turn(24))
    _assemble(client, session_id)  # advised to compact first: not sent
    compaction_id = _compact(client, session_id)
    brk = _broken_by(client, session_id)
    assert brk["cause"] == "compaction"
    assert brk["detail"].startswith(f"compaction {compaction_id} rewrote")
    assert sent["reused_prefix_items"] > 0


def test_an_assembly_a_compaction_superseded_is_not_the_call_before(
    client: TestClient, session_id: str
) -> None:
    """The lineage's first assembly, superseded by a compaction before it was sent: the one
    after it has no call before it, so nothing can be reused or broken."""
    _session(client, session_id)
    _append(client, session_id, *[item for n in range(1, 12) for item in _turn(n, "x " * 300)])
    assert _assemble(client, session_id)["reused_prefix_items"] == 0
    _compact(client, session_id)
    after = _assemble(client, session_id)
    assert (after["reused_prefix_tokens"], after["break"]) == (0, None)
    # Asked again with nothing appended and no compaction: the same call, reused whole.
    again = _assemble(client, session_id)
    assert again["reused_prefix_tokens"] == after["reused_prefix_tokens"] + after["new_tokens"]


def test_a_retraction_is_named(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    _append(client, session_id, *_turn(1))
    _assemble(client, session_id)
    assert client.post(f"/sessions/{session_id}/retractions", json={}).status_code == 201
    _append(client, session_id, *_turn(2))
    brk = _broken_by(client, session_id)
    assert brk["cause"] == "retracted"


def test_a_newly_excluded_item_breaks_nothing(client: TestClient, session_id: str) -> None:
    """An excluded item never showed, and its notice follows the history: the prefix holds."""
    _session(client, session_id)
    before = _assemble(client, session_id)
    _append(client, session_id, {"type": "message", "content": "no role"})
    cache = _assemble(client, session_id)
    assert cache["break"] is None
    assert cache["reused_prefix_tokens"] == before["reused_prefix_tokens"] + before["new_tokens"]


def test_a_moved_window_cut_is_named(client: TestClient, session_id: str) -> None:
    _session(client, session_id, context_window=8_000)
    brk = None
    for n in range(1, 60):
        _append(client, session_id, *_turn(n, f"case {n} " + "passed " * 400))
        cache = _assemble(client, session_id)
        if cache["break"] is not None:
            brk = cache["break"]
            break
    assert brk is not None, "the cut never moved"
    assert brk["cause"] == "window_cut"
    assert brk["detail"].startswith("the window's fitting moved its cut")


def test_tools_output_format_and_the_requests_own_contributions_are_named(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    _assemble(client, session_id)
    assert _broken_by(client, session_id, recall_tool=False)["cause"] == "tools"
    _assemble(client, session_id, recall_tool=False, output_format="responses")
    assert _broken_by(client, session_id, recall_tool=False, output_format="chat")["cause"] == (
        "output_format"
    )
    docs = [
        {"source": "docs", "items": [{"id": "a", "content": "Dates are UTC.", "layer": "prefix"}]}
    ]
    _assemble(client, session_id, recall_tool=False, output_format="chat", sources=docs)
    changed = [
        {"source": "docs", "items": [{"id": "a", "content": "Dates are local.", "layer": "prefix"}]}
    ]
    brk = _broken_by(client, session_id, recall_tool=False, output_format="chat", sources=changed)
    assert brk["cause"] == "override"
    assert brk["item_id"] == "a"


def test_contextd_plan_and_the_replay_diff_show_the_break(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    docs = [
        {"source": "docs", "items": [{"id": "tz", "content": "Dates are UTC.", "layer": "prefix"}]}
    ]
    first = client.post("/assemble", json={"session_id": session_id, "sources": docs}).json()
    client.put(f"/sessions/{session_id}/goal", json={"text": "Fix it and add a test."})
    second = client.post("/assemble", json={"session_id": session_id, "sources": docs}).json()
    table = render_plan(client.get(f"/assemblies/{second['assembly_id']}").json())
    goal_at = next(i["position"] for i in second["items"] if i["id"] == "goal")
    assert (
        f"prefix break  goal  at pos {goal_at} (goal): the goal changed (version 1 to 2)" in table
    )
    # The original without its source: the replayed prefix breaks where that source's item was.
    replayed = client.post(
        f"/assemblies/{first['assembly_id']}/replay", json={"overrides": {"drop_sources": ["docs"]}}
    )
    assert replayed.status_code == 201, replayed.text
    diff = replayed.json()["diff"]
    assert diff["removed"] == ["tz"]
    position = next(i["position"] for i in first["items"] if i["id"] == "tz")
    assert diff["prefix_break"]["position"] == position
    assert diff["prefix_break"]["cause"] == "override"
