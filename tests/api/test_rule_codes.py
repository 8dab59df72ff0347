"""Rules the schema cannot state are answered 422 with their own code, listed by the operations
that check them; state a valid request runs into is a 409 with its code; and the contract's
links lead where they say."""

from __future__ import annotations

from typing import Any

import yaml
from fastapi.testclient import TestClient

from app.domain.errors import RULES
from app.openapi import render_openapi
from tests.builders import user_msg

CONTRACT: dict[str, Any] = yaml.safe_load(render_openapi())


def _operations() -> dict[str, dict[str, Any]]:
    return {
        operation["operationId"]: operation
        for path in CONTRACT["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict) and "operationId" in operation
    }


def _listed(operation_id: str) -> set[str]:
    refusal = _operations()[operation_id]["responses"].get("422", {})
    return {rule["code"] for rule in refusal.get("x-rules", ())}


def _refusal(answer: Any) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


def test_every_rule_is_listed_by_an_operation_and_stated_in_words() -> None:
    listed = set().union(*(_listed(operation_id) for operation_id in _operations()))
    assert listed == set(RULES)
    for operation in _operations().values():
        refusal = operation["responses"].get("422", {})
        for rule in refusal.get("x-rules", ()):
            assert rule == {"code": rule["code"], "rule": RULES[rule["code"]]}
            assert f"`{rule['code']}`: {RULES[rule['code']]}" in refusal["description"]


def test_each_rule_is_answered_with_its_code_and_changes_nothing(
    client: TestClient, session_id: str
) -> None:
    sessions = "/sessions"
    created = client.post(sessions, json={"session_id": session_id})
    assert created.status_code == 201
    client.post(f"{sessions}/{session_id}/items", json={"items": [user_msg("hello")]})
    before = client.get(f"{sessions}/{session_id}/items").json()
    candidate = {"id": "a", "content": "text"}
    cases: list[tuple[str, str, str, dict[str, Any]]] = [
        (
            "create_session",
            "POST",
            sessions,
            {"compaction": {"high_watermark": 0.5, "low_watermark": 0.5}},
        ),
        (
            "create_session",
            "POST",
            sessions,
            {"compaction": {"low_watermark": 0.99}},
        ),
        (
            "assemble",
            "POST",
            "/assemble",
            {"sources": [{"source": "files", "items": [candidate, candidate]}]},
        ),
        (
            "recall",
            "POST",
            f"{sessions}/{session_id}/recall",
            {"from_seq": 2, "to_seq": 1, "pattern": "x"},
        ),
        ("recall", "POST", f"{sessions}/{session_id}/recall", {"seq": 1, "pattern": "(a"}),
        (
            "put_manifest",
            "PUT",
            "/manifests/rules",
            {"entries": [{"id": "a", "content": "x"}], "priorities": ["b"]},
        ),
        ("put_goal", "PUT", f"{sessions}/{session_id}/goal", {"text": " \n"}),
        (
            "put_world_state",
            "PUT",
            f"{sessions}/{session_id}/world-state",
            {"sections": {"plan": None}},
        ),
    ]
    expected = [
        "watermarks_out_of_order",
        "watermarks_out_of_order",
        "duplicate_candidate_ids",
        "seq_range_reversed",
        "invalid_pattern",
        "manifest_inconsistent",
        "blank_goal",
        "invalid_world_state",
    ]
    answered = []
    for operation_id, method, path, body in cases:
        answer = client.request(method, path, json=body)
        status, code = _refusal(answer)
        assert code in _listed(operation_id), (operation_id, code)
        answered.append((status, code))
    assert answered == [(422, code) for code in expected]
    assert client.get(f"{sessions}/{session_id}/items").json() == before
    assert client.get("/manifests/rules").status_code == 404


def test_reading_past_the_log_or_the_text_is_a_conflict_with_the_session(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id})
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("one line")]})
    recall = f"/sessions/{session_id}/recall"
    assert [
        _refusal(client.post(recall, json={"seq": 2})),
        _refusal(client.post(recall, json={"seq": 1, "from_line": 5})),
        _refusal(client.post(recall, json={"seq": 1, "from_char": 500})),
    ] == [(409, "seq_past_log"), (409, "window_past_text"), (409, "window_past_text")]


def test_every_link_names_an_operation_and_a_parameter_it_takes() -> None:
    operations = _operations()
    followed = 0
    for operation in operations.values():
        for response in operation["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                names = {parameter["name"] for parameter in target.get("parameters", ())}
                assert set(link["parameters"]) <= names, link
                followed += 1
    assert followed >= 40


def test_a_created_session_answers_every_operation_its_links_name(
    client: TestClient, session_id: str
) -> None:
    created = client.post("/sessions", json={"session_id": session_id})
    links = _operations()["create_session"]["responses"]["201"]["links"]
    reads = {
        operation["operationId"]: (method, path)
        for path, methods in CONTRACT["paths"].items()
        for method, operation in methods.items()
        if isinstance(operation, dict) and method == "get"
    }
    answers = {}
    for link in links.values():
        if link["operationId"] not in reads:
            continue
        _, path = reads[link["operationId"]]
        session = created.json()["session_id"]
        answers[link["operationId"]] = client.get(path.format(session_id=session)).status_code
    assert answers == {
        "get_session": 200,
        "list_items": 200,
        "get_history": 200,
        "compaction_advice": 200,
        "context_window": 200,
    }
