"""Delegate and fork child sessions, conclusions, governance inheritance and the load manifest,
over HTTP on PostgreSQL."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.contract.isolation import ManifestRequest
from app.domain.world_state import render_section
from tests.builders import assistant_msg, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory

RULES = {"text": "Never force-push."}
PERMISSIONS = {"network": False, "write": ["src/"]}


def _parent(client: TestClient, session_id: str) -> None:
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
    client.put(f"/sessions/{session_id}/goal", json={"text": "Ship v2"})
    client.put(
        f"/sessions/{session_id}/world-state",
        json={"sections": {"rules": RULES, "permissions": PERMISSIONS}},
    )
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("plan the release")]})


def _log(client: TestClient, session_id: str) -> list[dict[str, Any]]:
    page = client.get(f"/sessions/{session_id}/items", params={"limit": 1000}).json()
    entries: list[dict[str, Any]] = page["items"]
    return entries


def test_delegate_starts_from_a_brief_and_returns_one_conclusion(
    client: TestClient, session_id: str
) -> None:
    _parent(client, session_id)
    parent_history = client.get(f"/sessions/{session_id}/history").json()["items"]
    made = client.post(
        f"/sessions/{session_id}/delegate",
        json={
            "goal": "Find why the test fails",
            "items": [user_msg("the failing test is test_io")],
            "inherit": {"rules": True},
            "unit": "investigator",
        },
    )
    assert made.status_code == 201, made.text
    child = made.json()
    assert (child["kind"], child["parent_id"], child["inherit"]) == (
        "delegate",
        session_id,
        {"rules": True},
    )
    child_id = child["session_id"]
    detail = client.get(f"/sessions/{child_id}").json()
    assert detail["goal"] == {"version": 1, "text": "Find why the test fails"}
    child_history = client.get(f"/sessions/{child_id}/history").json()["items"]
    assert child_history == [
        render_section("rules", RULES, version=1),
        user_msg("the failing test is test_io"),
    ]
    client.post(f"/sessions/{child_id}/items", json={"items": load_trajectory(TRAJECTORIES[0])})
    conclusion = assistant_msg("Root cause: a race in the fixture; fixed in conftest.py")
    ended = client.post(f"/sessions/{child_id}/end", json={"conclusion": conclusion})
    assert ended.status_code == 200, ended.text
    assert client.get(f"/sessions/{session_id}/history").json()["items"] == [
        *parent_history,
        conclusion,
    ]
    last = _log(client, session_id)[-1]
    assert last["item"] == conclusion
    assert last["metadata"]["from_session"] == child_id
    assert last["unit"] == "investigator"


def test_fork_shares_history_and_leaves_the_parent_untouched_until_merged(
    client: TestClient, session_id: str
) -> None:
    _parent(client, session_id)
    before = client.get(f"/sessions/{session_id}/history").json()["items"]
    child = client.post(f"/sessions/{session_id}/fork", json={"unit": "explorer"}).json()
    parent_log = _log(client, session_id)
    assert parent_log[-1]["item"]["type"] == "contextd.child"
    client.post(f"/sessions/{child['session_id']}/items", json={"items": [user_msg("try plan B")]})
    assert client.get(f"/sessions/{child['session_id']}/history").json()["items"] == [
        *[i for i in before if i.get("role") != "developer"],
        user_msg("try plan B"),
    ]
    assert _log(client, session_id) == parent_log
    assert client.get(f"/sessions/{session_id}/history").json()["items"] == before
    merged = client.post(
        f"/sessions/{child['session_id']}/merge", json={"conclusion": assistant_msg("plan B works")}
    )
    assert merged.status_code == 201
    assert client.get(f"/sessions/{session_id}/history").json()["items"] == [
        *before,
        assistant_msg("plan B works"),
    ]


def test_governance_is_inherited_only_as_declared_and_never_gained(
    client: TestClient, session_id: str
) -> None:
    _parent(client, session_id)
    lacking = client.post(
        f"/sessions/{session_id}/delegate", json={"goal": "g", "inherit": {"secrets": True}}
    )
    assert (lacking.status_code, lacking.json()["error"]["code"]) == (409, "section_not_in_parent")
    child = client.post(
        f"/sessions/{session_id}/delegate", json={"goal": "g", "inherit": {"rules": True}}
    ).json()
    prefix = client.post("/assemble", json={"session_id": child["session_id"]}).json()["items"]
    # The child's history is short: its goal is in view at the top, not restated.
    assert [i["id"] for i in prefix if i["layer"] == "prefix"] == ["goal", "world_state:rules"]
    forked = client.post(f"/sessions/{session_id}/fork", json={}).json()
    fork_prefix = client.post("/assemble", json={"session_id": forked["session_id"]}).json()[
        "items"
    ]
    assert [i["id"] for i in fork_prefix if i["source"] == "world_state"] == []
    assert client.post("/sessions/no-such/delegate", json={"goal": "g"}).status_code == 404
    root_merge = client.post(f"/sessions/{session_id}/merge", json={"conclusion": user_msg("x")})
    assert (root_merge.status_code, root_merge.json()["error"]["code"]) == (
        409,
        "not_a_child_session",
    )


def test_each_unit_is_accounted_separately(client: TestClient, session_id: str) -> None:
    _parent(client, session_id)
    child = client.post(
        f"/sessions/{session_id}/delegate", json={"goal": "g", "unit": f"{session_id[:20]}-child"}
    ).json()
    client.post("/assemble", json={"session_id": session_id, "unit": f"{session_id[:20]}-parent"})
    made = client.post("/assemble", json={"session_id": child["session_id"]}).json()
    assert made["unit"] == f"{session_id[:20]}-child"
    text = client.get("/metrics").text
    for unit in (f"{session_id[:20]}-parent", f"{session_id[:20]}-child"):
        assert f'unit="{unit}"' in text


MANIFEST = {
    "entries": [
        {"id": "house-rules", "kind": "rule", "content": "Write tests first."},
        {
            "id": "security",
            "kind": "rule",
            "content": "Never log secrets.",
            "links": ["house-rules"],
        },
        {"id": "review-guide", "kind": "rule", "content": "Review for clarity."},
        {
            "id": "api-docs",
            "kind": "source",
            "content": "long body",
            "index": "api-docs: docs/api.md (endpoints)",
            "locator": "file://docs/api.md",
        },
    ],
    "roles": {
        "coder": {"include": ["security", "api-docs"]},
        "reviewer": {"include": ["review-guide", "house-rules"]},
    },
    "priorities": ["security", "house-rules"],
}


def test_manifest_roles_give_different_stable_prefixes(client: TestClient, session_id: str) -> None:
    name = f"{session_id[:100]}-manifest"
    assert client.put(f"/manifests/{name}", json=MANIFEST).json() == {"name": name, "version": 1}
    stored = ManifestRequest.model_validate(MANIFEST).model_dump(mode="json")
    assert client.get(f"/manifests/{name}").json() == {"name": name, "version": 1, **stored}
    client.post("/sessions", json={"session_id": session_id})

    def prefix(role: str) -> list[tuple[str, str | None]]:
        result = client.post(
            "/assemble", json={"session_id": session_id, "manifest": name, "role": role}
        ).json()
        assert result["startup_tokens"] > 0
        return [(i["id"], i["content"]) for i in result["items"]]

    coder, reviewer = prefix("coder"), prefix("reviewer")
    assert coder == [
        ("manifest:0000:security", "Never log secrets."),
        ("manifest:0001:house-rules", "Write tests first."),
        ("manifest:api-docs", "api-docs: docs/api.md (endpoints)"),
    ]
    assert reviewer == [
        ("manifest:0000:house-rules", "Write tests first."),
        ("manifest:0001:review-guide", "Review for clarity."),
    ]
    assert prefix("coder") == coder
    assert prefix("reviewer") == reviewer


def test_bad_manifests_are_refused(client: TestClient, session_id: str) -> None:
    name = f"{session_id[:100]}-bad"
    duplicate = {"entries": [{"id": "a", "content": "x"}, {"id": "a", "content": "y"}]}
    cycle = {
        "entries": [
            {"id": "a", "content": "x", "links": ["b"]},
            {"id": "b", "content": "y", "links": ["a"]},
        ]
    }
    assert client.put(f"/manifests/{name}", json=duplicate).status_code == 422
    assert client.put(f"/manifests/{name}", json=cycle).status_code == 422
    assert client.get(f"/manifests/{name}").status_code == 404
    client.put(f"/manifests/{name}", json=MANIFEST)
    no_view = client.post("/assemble", json={"manifest": name, "role": "auditor"})
    assert (no_view.status_code, no_view.json()["error"]["code"]) == (409, "role_not_in_manifest")


def test_a_manifest_name_is_one_path_segment(client: TestClient) -> None:
    # `/manifests/{name}` cannot reach a name holding a slash, so no request may use one.
    named = client.post(
        "/assemble", json={"session_id": "any", "manifest": "team/planner", "role": "planner"}
    )
    assert named.status_code == 422
    assert named.json()["error"]["details"][0]["loc"] == ["body", "manifest"]


def test_the_schema_says_a_fork_takes_no_brief_and_a_delegate_needs_a_goal(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    fork = client.post(f"/sessions/{session_id}/fork", json={"goal": "g"})
    delegate = client.post(f"/sessions/{session_id}/delegate", json={"items": []})
    refusals = [(r.status_code, r.json()["error"]["details"]) for r in (fork, delegate)]
    assert refusals == [
        (422, [{"loc": ["body", "goal"], "msg": "Extra inputs are not permitted"}]),
        (422, [{"loc": ["body", "goal"], "msg": "Field required"}]),
    ]


def test_what_the_stored_state_refuses_is_a_named_conflict(
    client: TestClient, session_id: str
) -> None:
    """The requests are well formed; the sessions they name cannot take them (409, not 422)."""
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    merge = client.post(f"/sessions/{session_id}/merge", json={"conclusion": {}})
    fork = client.post(f"/sessions/{session_id}/fork", json={"inherit": {"plan": True}})
    assert (merge.status_code, merge.json()) == (
        409,
        {
            "error": {
                "code": "not_a_child_session",
                "message": f"session {session_id!r} has no parent to report to",
                "details": [{"loc": ["path", "session_id"], "msg": "not a child session"}],
            }
        },
    )
    assert (fork.status_code, fork.json()) == (
        409,
        {
            "error": {
                "code": "section_not_in_parent",
                "message": "a child cannot inherit what its parent lacks: plan",
                "details": [
                    {"loc": ["body", "inherit", "plan"], "msg": "parent has no such section"}
                ],
            }
        },
    )
