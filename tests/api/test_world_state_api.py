"""Goals and world state over HTTP, on PostgreSQL: versioned, diffed, re-anchored."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.domain.items import visible_text
from app.domain.world_state import (
    GOAL_RESTATED_AFTER_TOKENS,
    RULES_REPLACEMENT_NOTICE,
    Goal,
    goal_restatement,
    render_goal,
    render_section,
)
from tests.builders import assistant_msg, long_text, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory

LONG_TEXT = long_text(GOAL_RESTATED_AFTER_TOKENS)
"""A history this long has its goal restated at the end."""
RULES = {"text": "Run the tests before every commit.", "directory": "src/"}


def _session(client: TestClient, session_id: str) -> None:
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201


def _put_state(client: TestClient, session_id: str, sections: dict[str, Any]) -> dict[str, Any]:
    response = client.put(f"/sessions/{session_id}/world-state", json={"sections": sections})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_goal_versions_are_facts_and_the_session_shows_the_current_one(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    first = client.put(f"/sessions/{session_id}/goal", json={"text": "Fix the flaky test"})
    second = client.put(f"/sessions/{session_id}/goal", json={"text": "Fix it without mocks"})
    assert (first.json()["version"], second.json()["version"]) == (1, 2)
    detail = client.get(f"/sessions/{session_id}").json()
    assert detail["goal"] == {"version": 2, "text": "Fix it without mocks"}
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [e["item"] for e in logged] == [
        {"type": "contextd.goal", "version": 1, "text": "Fix the flaky test"},
        {"type": "contextd.goal", "version": 2, "text": "Fix it without mocks"},
    ]
    assert client.get(f"/sessions/{session_id}/history").json()["items"] == []


def test_world_state_sends_only_what_changed(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    first = _put_state(client, session_id, {"rules": RULES, "environment": {"cwd": "/repo"}})
    assert first["version"] == 1
    assert first["patch"] is None
    assert first["updates"] == [
        render_section("environment", {"cwd": "/repo"}, version=1),
        render_section("rules", RULES, version=1),
    ]
    unchanged = _put_state(client, session_id, {"rules": RULES, "environment": {"cwd": "/repo"}})
    assert (unchanged["updates"], unchanged["patch"]) == ([], {})
    new_rules = {"text": "Never push to main."}
    changed = _put_state(client, session_id, {"rules": new_rules, "environment": {"cwd": "/repo"}})
    assert changed["changes"] == [{"section": "rules", "change": "changed"}]
    assert changed["patch"] == {"rules": {"directory": None, "text": "Never push to main."}}
    [update] = changed["updates"]
    assert RULES_REPLACEMENT_NOTICE in visible_text(update)
    removed = _put_state(client, session_id, {"environment": {"cwd": "/repo"}})
    assert removed["changes"] == [{"section": "rules", "change": "removed"}]
    assert client.get(f"/sessions/{session_id}").json()["world_state_version"] == 4


def test_bad_world_state_and_goal_input_is_refused_and_stores_nothing(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    cases = [
        client.put(f"/sessions/{session_id}/world-state", json={"sections": {"rules": None}}),
        client.put(f"/sessions/{session_id}/world-state", json={"sections": {"bad id!": 1}}),
        client.put(f"/sessions/{session_id}/world-state", json={"sections": None}),
        client.put(f"/sessions/{session_id}/goal", json={"text": "   "}),
        client.put(f"/sessions/{session_id}/goal", json={"text": "x" * 100_001}),
        client.put("/sessions/no-such-session/goal", json={"text": "goal"}),
        client.post(
            f"/sessions/{session_id}/items",
            json={"items": [{"type": "contextd.goal", "version": 9, "text": "spoofed"}]},
        ),
    ]
    assert [c.status_code for c in cases] == [422, 422, 422, 422, 422, 404, 422]
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 0


def test_session_assembly_pins_goal_and_rules_in_the_prefix_and_restates_the_goal(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    client.put(f"/sessions/{session_id}/goal", json={"text": "Ship the release notes"})
    _put_state(client, session_id, {"rules": RULES, "environment": {"cwd": "/repo"}})
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("start")]})
    short = client.post("/assemble", json={"session_id": session_id}).json()
    # Near the top of a short history the goal is in view: it is not restated.
    assert [(i["id"], i["layer"]) for i in short["items"]] == [
        ("goal", "prefix"),
        ("world_state:rules", "prefix"),
        ("history:0", "recent"),
        ("world_state:environment", "task"),  # what changes goes after the history
    ]
    client.post(f"/sessions/{session_id}/items", json={"items": [assistant_msg(LONG_TEXT)]})
    result = client.post("/assemble", json={"session_id": session_id}).json()
    goal_text = visible_text(render_goal("Ship the release notes", version=1))
    assert [(i["id"], i["layer"]) for i in result["items"]] == [
        ("goal", "prefix"),
        ("world_state:rules", "prefix"),
        ("history:0", "recent"),
        ("history:1", "recent"),
        ("world_state:environment", "task"),
        ("goal#restated", "prefix"),
    ]
    assert result["items"][0]["content"] == goal_text
    assert result["items"][-1]["content"] == goal_text
    assert result["items"][:2] == short["items"][:2]


def test_after_a_compaction_rules_are_resent_and_the_goal_survives(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    trajectory = load_trajectory(TRAJECTORIES[4])
    goal = trajectory[1]["content"][0]["text"]
    client.put(f"/sessions/{session_id}/goal", json={"text": goal})
    _put_state(client, session_id, {"rules": RULES})
    client.post(f"/sessions/{session_id}/items", json={"items": trajectory})
    compacted = client.post("/compact", json={"session_id": session_id, "strategy": "summary"})
    assert compacted.status_code == 201, compacted.text
    history = client.get(f"/sessions/{session_id}/history").json()["items"]
    assert history[:2] == [render_goal(goal, version=1), render_section("rules", RULES, version=1)]
    # The compaction reset the baseline, so the rules go out again in full.
    resent = _put_state(client, session_id, {"rules": RULES})
    assert resent["changes"] == [{"section": "rules", "change": "changed"}]
    assert RULES["text"] in visible_text(resent["updates"][0])
    result = client.post("/assemble", json={"session_id": session_id}).json()
    goal_text = visible_text(render_goal(goal, version=1))
    assert result["items"][0]["content"] == goal_text
    # The task statement is long: the end restates its opening and points at the whole.
    assert result["items"][-1]["content"] == goal_restatement(Goal(version=1, text=goal))


def test_a_long_goal_is_pinned_whole_and_restated_by_its_opening(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    goal = "Migrate the billing service to the new ledger API. " * 100
    client.put(f"/sessions/{session_id}/goal", json={"text": goal})
    client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("start"), assistant_msg(LONG_TEXT)]},
    )
    result = client.post("/assemble", json={"session_id": session_id}).json()
    restatement = goal_restatement(Goal(version=1, text=goal))
    assert restatement is not None
    assert [(i["id"], i["content"]) for i in result["items"]] == [
        ("goal", visible_text(render_goal(goal, version=1))),
        ("history:0", None),
        ("history:1", None),
        ("goal#restated", restatement),
    ]
    assert result["total_tokens"] == sum(i["tokens"] for i in result["items"])
    assert result["items"][-1]["tokens"] < result["items"][0]["tokens"] // 4
