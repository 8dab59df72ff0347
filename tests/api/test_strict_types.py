"""A request body's scalars are taken as the contract types them: no boolean is a number, no
number is a string, no string is a number. What `openapi.yaml` refuses, the service refuses."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.builders import user_msg


def _refusal(loc: list[str | int], msg: str) -> dict[str, Any]:
    return {
        "error": {
            "code": "validation_error",
            "message": "the request failed validation",
            "details": [{"loc": ["body", *loc], "msg": msg}],
        }
    }


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        (
            {"compaction": {"high_watermark": True}},
            ["compaction", "high_watermark"],
            "Input should be a valid number",
        ),
        ({"recall_tool": 1}, ["recall_tool"], "Input should be a valid boolean"),
        ({"context_window": "1000"}, ["context_window"], "Input should be a valid integer"),
        ({"model": 4}, ["model"], "Input should be a valid string"),
    ],
)
def test_a_session_is_created_from_its_declared_types_only(
    client: TestClient, body: dict[str, Any], loc: list[str | int], msg: str
) -> None:
    response = client.post("/sessions", json=body)
    assert (response.status_code, response.json()) == (422, _refusal(loc, msg))


def test_manifest_priorities_are_strings_not_numbers(client: TestClient) -> None:
    response = client.put("/manifests/strict", json={"entries": [], "priorities": [1]})
    assert (response.status_code, response.json()) == (
        422,
        _refusal(["priorities", 0], "Input should be a valid string"),
    )


def test_append_metadata_and_candidates_are_typed_strictly(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    append = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("a")], "metadata": {"harness_authored": 1}},
    )
    assert (append.status_code, append.json()) == (
        422,
        _refusal(["metadata", "harness_authored"], "Input should be a valid boolean"),
    )
    candidate = {"id": "c", "content": "x", "priority": True}
    assemble = client.post(
        "/assemble",
        json={"session_id": session_id, "sources": [{"source": "s", "items": [candidate]}]},
    )
    assert (assemble.status_code, assemble.json()) == (
        422,
        _refusal(["sources", 0, "items", 0, "priority"], "Input should be a valid number"),
    )


def test_an_integer_is_still_a_number(client: TestClient) -> None:
    """JSON has one number type: `1` is a valid number wherever a fraction is."""
    response = client.post("/sessions", json={"compaction": {"high_watermark": 1}})
    assert response.status_code == 201
    assert response.json()["compaction"]["high_watermark"] == 1.0


def test_an_integer_may_be_spelled_with_a_zero_fraction(client: TestClient) -> None:
    """JSON Schema reads `2000.0` as an integer, so the contract's integers accept it; a
    fraction, a string or a boolean is still no integer."""
    accepted = client.post("/sessions", json={"context_window": 2000.0})
    assert accepted.status_code == 201
    assert accepted.json()["context_window"] == 2000
    for spelled in (2000.5, "2000", True):
        refused = client.post("/sessions", json={"context_window": spelled})
        assert refused.status_code == 422, spelled


def test_a_sequence_number_is_bounded_where_every_json_reader_is_exact(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    response = client.post(f"/sessions/{session_id}/retractions", json={"seq": 2**53})
    assert (response.status_code, response.json()) == (
        422,
        _refusal(["seq"], "Input should be less than or equal to 9007199254740991"),
    )


def test_a_candidate_is_text_or_an_item_never_null(client: TestClient, session_id: str) -> None:
    """The schema states the rule (`content` or `item`, not both); a null is no value."""
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    candidate = {"id": "c", "content": None, "item": {"type": "message"}}
    response = client.post(
        "/assemble",
        json={"session_id": session_id, "sources": [{"source": "s", "items": [candidate]}]},
    )
    assert (response.status_code, response.json()) == (
        422,
        _refusal(["sources", 0, "items", 0, "content"], "Input should be a valid string"),
    )
