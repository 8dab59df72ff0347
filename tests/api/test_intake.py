"""What a request body may carry: everything accepted is kept and read back exactly, on both
engines; everything else is refused with a 4xx naming where, and nothing is written."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import String

from app.api.json_body import MAX_INTEGER_DIGITS
from app.domain import names
from app.domain.items import MAX_TYPE_LENGTH
from app.main import create_app
from app.settings import Settings
from app.storage.tables import AssemblyRow, Fact, Manifest, SessionRow
from tests.builders import assistant_msg, tool_call, tool_output, user_msg

DEFAULT_DEPTH = Settings().max_json_depth
POST_JSON = {"content-type": "application/json"}


@pytest.fixture
def service(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url))) as client:
        yield client


def nested(levels: int) -> Any:
    """A JSON value `levels` containers deep (a scalar is 0)."""
    value: Any = "leaf"
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value


def nested_text(levels: int) -> str:
    """`nested(levels)` as JSON text (too deep for the standard library's encoder)."""
    return "[" * levels + '"leaf"' + "]" * levels


def _append(client: TestClient, session_id: str, body: bytes) -> Any:
    return client.post(f"/sessions/{session_id}/items", content=body, headers=POST_JSON)


def _last_seq(client: TestClient, session_id: str) -> int:
    last_seq: int = client.get(f"/sessions/{session_id}").json()["last_seq"]
    return last_seq


# Values orjson alone would change (an integer beyond 64 bits becomes a float), the NUL
# character tool outputs carry, and the deepest value an append body may hold: body, `items`,
# the item and `x_meta` take four of the levels.
EDGE_VALUES = {
    "beyond_u64": 123456789012345678901234567890,
    "beyond_i64": -9223372036854775809,
    "u64_max_plus_one": 18446744073709551616,
    "fraction": 0.1,
    "large_float": 1.5e300,
    "at_the_digit_limit": int("9" * MAX_INTEGER_DIGITS),
    "deep": nested(DEFAULT_DEPTH - 4),
}


def test_everything_accepted_reads_back_exactly(service: TestClient, session_id: str) -> None:
    items = [
        {**user_msg("list the files\u0000 please"), "x_meta": EDGE_VALUES},
        {**tool_call("c1", arguments=json.dumps({"n": EDGE_VALUES["beyond_u64"]})), "x_meta": 1},
        {**tool_output("c1", "a.py\u0000b.py"), "x_meta": EDGE_VALUES},
        {**assistant_msg("two files"), "x_meta": EDGE_VALUES},
    ]
    service.post("/sessions", json={"session_id": session_id}).raise_for_status()
    appended = service.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text

    logged = service.get(f"/sessions/{session_id}/items").json()["items"]
    history = service.get(f"/sessions/{session_id}/history").json()
    dry_run = service.post(
        "/compact",
        json={"session_id": session_id, "strategy": "clear_tool_results", "dry_run": True},
    ).json()
    assembly = service.post("/assemble", json={"session_id": session_id}).json()
    stored = service.get(f"/assemblies/{assembly['assembly_id']}").json()
    # The standard library's parser (what `.json()` uses) keeps big integers exact.
    assert [entry["item"] for entry in logged] == items
    assert history["items"] == items
    assert dry_run["history"] == items
    assert [entry["item"] for entry in assembly["items"]] == items
    assert assembly["messages"] == items
    assert [entry["item"] for entry in stored["response"]["items"]] == items


def test_an_item_appended_alone_is_stored_as_one_appended_in_a_batch(
    service: TestClient, session_id: str
) -> None:
    # A single fact takes the statement's one-fact form, a batch the form for any size: small
    # bodies on the event loop, large ones (the deep values) in a worker thread.
    small = {**user_msg("nul\u0000 inside, \u00e9 and \U0001f600"), "x_meta": {"n": 2**70}}
    items = [
        small,
        {**tool_call("c1", arguments="{}"), "x_meta": EDGE_VALUES},
        {**tool_output("c1", "a.py\u0000b.py"), "x_meta": None},
    ]
    alone, batched = f"{session_id}-alone", f"{session_id}-batched"
    for name in (alone, batched):
        service.post("/sessions", json={"session_id": name}).raise_for_status()
    metadata = {"unit": "worker-1", "phase": "act"}
    for item in items:
        appended = service.post(f"/sessions/{alone}/items", json={"items": [item], **metadata})
        assert appended.status_code == 201, appended.text
    appended = service.post(f"/sessions/{batched}/items", json={"items": items, **metadata})
    assert appended.status_code == 201, appended.text

    def logged(name: str) -> list[dict[str, Any]]:
        entries = service.get(f"/sessions/{name}/items").json()["items"]
        return [{k: v for k, v in entry.items() if k != "recorded_at"} for entry in entries]

    assert [entry["item"] for entry in logged(alone)] == items
    assert logged(alone) == logged(batched)


def test_a_stored_request_keeps_its_numbers(service: TestClient) -> None:
    numbers = {key: value for key, value in EDGE_VALUES.items() if key != "deep"}
    candidate = {
        "id": "doc",
        "item": {**user_msg("hi"), "x_meta": numbers},
        "locator": "file://notes.txt",
    }
    request = {"sources": [{"source": "retrieval", "items": [candidate]}]}
    assembly = service.post("/assemble", json=request)
    assert assembly.status_code == 201, assembly.text
    assert assembly.json()["items"][0]["item"] == candidate["item"]
    stored = service.get(f"/assemblies/{assembly.json()['assembly_id']}").json()
    assert stored["request"]["sources"] == request["sources"]


@pytest.mark.parametrize("levels", [DEFAULT_DEPTH - 2, 254, 1000, 1025, 5000])
def test_a_body_nested_beyond_the_limit_is_refused_naming_where(
    client: TestClient, session_id: str, levels: int
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    body = '{"items": [{"type": "vendor_event", "v": ' + nested_text(levels) + "}]}"
    refused = _append(client, session_id, body.encode())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation_error"
    assert f"deeper than {DEFAULT_DEPTH} levels" in error["message"]
    [detail] = error["details"]
    if levels < 990:  # deeper, the standard library gives up before saying where
        # body, items, the item and `v` are four levels; the first one too many:
        assert detail["loc"] == ["body", "items", 0, "v", *[0] * (DEFAULT_DEPTH - 3)]
    assert _last_seq(client, session_id) == 0


def test_the_depth_limit_is_a_setting(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, max_json_depth=6)
    with TestClient(create_app(settings)) as service:
        service.post("/sessions", json={"session_id": session_id}).raise_for_status()
        # body, items, item, v: four levels, then the nested value.
        accepted = {"items": [{"type": "vendor_event", "v": nested(3)}]}
        refused = {"items": [{"type": "vendor_event", "v": nested(4)}]}
        assert service.post(f"/sessions/{session_id}/items", json=accepted).status_code == 201
        answer = service.post(f"/sessions/{session_id}/items", json=refused)
        assert answer.status_code == 422
        assert answer.json()["error"]["details"] == [
            {"loc": ["body", "items", 0, "v", 0, "k", 0], "msg": "nested deeper than 6 levels"}
        ]
        # Every route's body is bounded, not only appends.
        world = service.put(f"/sessions/{session_id}/world-state", json={"sections": nested(7)})
        assert world.status_code == 422
        assert "deeper than 6 levels" in world.json()["error"]["message"]
        assert _last_seq(service, session_id) == 1


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_numbers_json_cannot_keep_are_refused_naming_where(
    client: TestClient, session_id: str, token: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    body = '{"items": [{"type": "vendor_event", "n": [1, ' + token + "]}]}"
    refused = _append(client, session_id, body.encode())
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["details"]) == (
        "validation_error",
        [{"loc": ["body", "items", 0, "n", 1], "msg": "not a finite number"}],
    )
    assert _last_seq(client, session_id) == 0


def test_an_integer_beyond_the_digit_limit_is_refused_naming_it(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    body = '{"items": [{"type": "vendor_event", "n": ' + "7" * 5_000 + "}]}"
    refused = _append(client, session_id, body.encode())
    assert (refused.status_code, refused.json()) == (
        422,
        {
            "error": {
                "code": "validation_error",
                "message": "integers are kept exact up to 4300 digits, the limit; send a longer "
                "number as a string",
                "details": [{"loc": ["body"], "msg": "an integer of more than 4300 digits"}],
            }
        },
    )
    assert _last_seq(client, session_id) == 0


def test_invalid_utf8_is_a_400_saying_where(client: TestClient, session_id: str) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    body = b'{"items": [{"type": "vendor_event", "t": "caf\xe9"}]}'
    refused = _append(client, session_id, body)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": "malformed_json",
        "message": "the request body is not valid JSON",
        "details": [
            {
                "loc": ["body", 45],
                "msg": "the body is not valid utf-8 at byte 45: invalid continuation byte",
            }
        ],
    }


def test_a_chunked_body_over_the_limit_is_413(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, max_body_bytes=2000)
    with TestClient(create_app(settings)) as service:
        service.post("/sessions", json={"session_id": session_id}).raise_for_status()

        def chunks() -> Iterator[bytes]:  # no Content-Length: the size shows only as it streams
            yield b'{"items": [{"type": "vendor_event", "t": "'
            yield from [b"x" * 1000] * 3
            yield b'"}]}'

        refused = service.post(f"/sessions/{session_id}/items", content=chunks(), headers=POST_JSON)
        assert refused.status_code == 413
        assert refused.json()["error"] == {
            "code": "payload_too_large",
            "message": "the request body exceeds the limit of 2000 bytes",
            "details": None,
        }
        assert _last_seq(service, session_id) == 0


def test_tool_arguments_nested_thousands_deep_still_compact(
    client: TestClient, session_id: str
) -> None:
    # The arguments are a string, kept as sent; reading them must not fail either.
    arguments = '{"a": ' + nested_text(5000) + "}"
    items = [user_msg("go"), tool_call("c1", arguments=arguments), tool_output("c1", "ok")]
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    client.post(f"/sessions/{session_id}/items", json={"items": items * 3}).raise_for_status()
    for strategy in ("clear_tool_results", "truncate", "summary", "handoff", "notes"):
        answer = client.post(
            "/compact",
            json={
                "session_id": session_id,
                "strategy": strategy,
                "dry_run": True,
                "params": {"keep_recent": 0},
            },
        )
        assert answer.status_code == 200, (strategy, answer.text)


# Names callers choose become columns: each is refused with a 422 where it is given, and a
# path naming what cannot exist is a 404 like any unknown name.

NUL = "a\u0000b"
NUL_IN_PATH = "a%00b"
TOO_LONG = "n" * 201


def test_names_that_cannot_be_stored_are_refused_naming_the_field(
    service: TestClient, session_id: str
) -> None:
    items_path = f"/sessions/{session_id}/items"
    service.post("/sessions", json={"session_id": session_id}).raise_for_status()
    refusals = [
        ("/sessions", {"session_id": "."}, ["body", "session_id"]),
        ("/sessions", {"session_id": ".."}, ["body", "session_id"]),
        ("/sessions", {"session_id": NUL}, ["body", "session_id"]),
        ("/sessions", {"session_id": TOO_LONG}, ["body", "session_id"]),
        ("/sessions", {"model": NUL}, ["body", "model"]),
        ("/sessions", {"model": TOO_LONG}, ["body", "model"]),
        (items_path, {"items": [user_msg("x")], "unit": NUL}, ["body", "unit"]),
        (items_path, {"items": [user_msg("x")], "phase": TOO_LONG}, ["body", "phase"]),
        (
            items_path,
            {"items": [user_msg("x")], "idempotency_key": NUL},
            ["body", "idempotency_key"],
        ),
        (items_path, {"items": [user_msg("x"), {"type": NUL}]}, ["body", "items", 1, "type"]),
        (items_path, {"items": [{"type": "t" * 65}]}, ["body", "items", 0, "type"]),
        (f"/sessions/{session_id}/delegate", {"goal": "g", "unit": NUL}, ["body", "unit"]),
        (f"/sessions/{session_id}/fork", {"session_id": ".."}, ["body", "session_id"]),
        (
            f"/sessions/{session_id}/delegate",
            {"goal": "g", "items": [{"type": NUL}]},
            ["body", "items", 0, "type"],
        ),
    ]
    for path, body, loc in refusals:
        answer = service.post(path, json=body)
        assert answer.status_code == 422, (path, body, answer.text)
        assert [d["loc"] for d in answer.json()["error"]["details"]] == [loc], (path, body)
    for name in (NUL_IN_PATH, TOO_LONG):
        answer = service.put(f"/manifests/{name}", json={"entries": []})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["details"][0]["loc"] == ["path", "name"]
    assert _last_seq(service, session_id) == 0
    assert service.get(f"/sessions/{TOO_LONG}").status_code == 404


def test_a_session_named_three_dots_is_only_a_name(database_url: str) -> None:
    # A tenant of its own: other tests (the contract fuzzing) may have made "..." in theirs.
    tenant = f"dots-{uuid.uuid4().hex[:8]}"
    settings = Settings(database_url=database_url, api_keys=[f"{tenant}:key-{tenant}"])
    with TestClient(create_app(settings)) as service:
        auth = {"Authorization": f"Bearer key-{tenant}"}
        created = service.post("/sessions", json={"session_id": "..."}, headers=auth)
        assert created.status_code == 201, created.text
        assert service.get("/sessions/...", headers=auth).status_code == 200


def test_a_path_naming_what_cannot_exist_is_not_found(service: TestClient) -> None:
    session = f"/sessions/{NUL_IN_PATH}"
    requests: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", session, None),
        ("GET", f"{session}/items", None),
        ("POST", f"{session}/items", {"items": [user_msg("x")]}),
        ("GET", f"{session}/history", None),
        ("GET", f"{session}/context-window", None),
        ("GET", f"{session}/compaction-advice", None),
        ("PUT", f"{session}/goal", {"text": "g"}),
        ("PUT", f"{session}/world-state", {"sections": {}}),
        ("POST", f"{session}/usage", {}),
        ("POST", f"{session}/delegate", {"goal": "g"}),
        ("POST", f"{session}/fork", {}),
        ("POST", f"{session}/merge", {"conclusion": user_msg("x")}),
        ("POST", f"{session}/end", {}),
        ("GET", f"/manifests/{NUL_IN_PATH}", None),
        ("GET", f"/assemblies/{NUL_IN_PATH}", None),
        ("POST", f"/assemblies/{NUL_IN_PATH}/replay", {}),
    ]
    for method, path, body in requests:
        answer = service.request(method, path, json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found"), (
            method,
            path,
            answer.text,
        )


def test_usage_naming_an_assembly_that_cannot_exist_is_not_found(
    service: TestClient, session_id: str
) -> None:
    service.post("/sessions", json={"session_id": session_id}).raise_for_status()
    answer = service.post(f"/sessions/{session_id}/usage", json={"assembly_id": NUL})
    assert answer.status_code == 404, answer.text


def test_names_are_as_long_as_their_columns() -> None:
    named = [
        SessionRow.__table__.c.external_id,
        SessionRow.__table__.c.model,
        SessionRow.__table__.c.unit,
        Fact.__table__.c.unit,
        Fact.__table__.c.phase,
        Fact.__table__.c.idempotency_key,
        AssemblyRow.__table__.c.unit,
        AssemblyRow.__table__.c.phase,
        Manifest.__table__.c.name,
    ]
    lengths = {column.type.length for column in named if isinstance(column.type, String)}
    assert lengths == {names.MAX_LENGTH}
    fact_type = Fact.__table__.c.type.type
    assert isinstance(fact_type, String)
    assert fact_type.length == MAX_TYPE_LENGTH
