"""Sessions and the fact log over HTTP, against real PostgreSQL."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.builders import assistant_msg, system_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory


def _create(client: TestClient, session_id: str, **attributes: Any) -> dict[str, Any]:
    response = client.post("/sessions", json={"session_id": session_id, **attributes})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_create_session_returns_attributes_and_is_idempotent(
    client: TestClient, session_id: str
) -> None:
    created = _create(
        client, session_id, context_window=128_000, model="gpt-test", metadata={"a": 1}
    )
    assert {k: v for k, v in created.items() if k != "created_at"} == {
        "session_id": session_id,
        "encoding": "o200k_base",
        "context_window": 128_000,
        # The default 16,000-token output reserve; the service's default watermarks.
        "usable_window": 112_000,
        "model": "gpt-test",
        "metadata": {"a": 1},
        "hooks": {"pre_compact": None, "session_end": None, "failure_policy": "fail_open"},
        "compaction": {"high_watermark": 0.9, "low_watermark": 0.25},
        # A model of no known family: the terms of an unknown provider.
        "cache": {
            "read_price": 0.1,
            "write_price": 1.0,
            "ttl_seconds": 300,
            "minimum_prefix": 1024,
            "block": 1,
        },
        "recall_tool": True,
        # A model tiktoken does not know: the conservative default of an unknown tokenizer.
        "tokenizer": {
            "family": "other",
            "ratio": 1.25,
            "overhead_tokens": 0,
            "calibrated": False,
            "samples": 0,
            "exact": False,
        },
        "last_seq": 0,
    }
    again = client.post(
        "/sessions",
        json={
            "session_id": session_id,
            "context_window": 128_000,
            "model": "gpt-test",
            "metadata": {"a": 1},
        },
    )
    assert (again.status_code, again.json()) == (200, created)
    different = client.post("/sessions", json={"session_id": session_id, "context_window": 1000})
    assert different.status_code == 409
    assert different.json()["error"]["code"] == "conflict"


def test_session_without_id_gets_a_derived_one(client: TestClient) -> None:
    first = client.post("/sessions", json={}).json()["session_id"]
    second = client.post("/sessions", json={}).json()["session_id"]
    assert first.startswith("sess_")
    assert second.startswith("sess_")
    assert first != second


def test_append_returns_sequence_types_and_exact_tokens(
    client: TestClient, session_id: str, postgres_timeline: int
) -> None:
    _create(client, session_id)
    items = [
        system_msg("be terse"),
        user_msg("hello world"),
        tool_call("c1", "sh", '{"cmd":"ls"}'),
        tool_output("c1", "a.py"),
        {"type": "vendor_event", "x": 1},
    ]
    response = client.post(
        f"/sessions/{session_id}/items", json={"items": items, "unit": "planner"}
    )
    assert response.status_code == 201, response.text
    assert response.json() == {
        "first_seq": 1,
        "last_seq": 5,
        "items": [
            {"seq": 1, "type": "message", "tokens": 2},
            {"seq": 2, "type": "message", "tokens": 2},
            {"seq": 3, "type": "function_call", "tokens": 7},
            {"seq": 4, "type": "function_call_output", "tokens": 2},
            {"seq": 5, "type": "vendor_event", "tokens": 0},
        ],
        "excluded": [
            {"seq": 1, "type": "message", "reason": "system_message", "detail": None},
            {"seq": 5, "type": "vendor_event", "reason": "unknown_type", "detail": None},
        ],
        "timeline": postgres_timeline,
    }
    page = client.get(f"/sessions/{session_id}/items", params={"after_seq": 0, "limit": 2}).json()
    assert [entry["item"] for entry in page["items"]] == items[:2]
    assert [entry["timeline"] for entry in page["items"]] == [postgres_timeline] * 2
    assert page["next_after_seq"] == 2
    rest = client.get(f"/sessions/{session_id}/items", params={"after_seq": 2}).json()
    assert [entry["item"] for entry in rest["items"]] == items[2:]
    assert rest["next_after_seq"] is None
    detail = client.get(f"/sessions/{session_id}").json()
    assert (detail["last_seq"], detail["item_count"], detail["active_tokens"]) == (5, 5, 11)


def test_append_with_stale_expected_last_seq_conflicts_and_writes_nothing(
    client: TestClient, session_id: str
) -> None:
    _create(client, session_id)
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("one")]})
    response = client.post(
        f"/sessions/{session_id}/items", json={"items": [user_msg("two")], "expected_last_seq": 0}
    )
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "sequence_conflict",
        "message": "expected last_seq 0 but the session is at 1; nothing was written",
        "details": {"expected": 0, "actual": 1},
    }
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 1


def test_a_batch_asked_to_refuse_malformed_items_is_refused_whole_naming_the_fault(
    client: TestClient, session_id: str
) -> None:
    _create(client, session_id)
    items = [user_msg("one"), {"type": "message", "content": "no role"}, user_msg("three")]
    refused = client.post(
        f"/sessions/{session_id}/items", json={"items": items, "malformed": "refuse"}
    )
    assert refused.status_code == 422
    assert refused.json()["error"] == {
        "code": "malformed_item",
        "message": "item 1 is malformed: message without role; nothing was written",
        "details": [{"loc": ["body", "items", 1], "msg": "message without role"}],
    }
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 0
    # By default it is appended, kept out of every context, and says why.
    excluded = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert excluded.status_code == 201
    assert excluded.json()["excluded"] == [
        {"seq": 2, "type": "message", "reason": "malformed", "detail": "message without role"}
    ]


def test_repeated_idempotency_key_returns_original_response(
    client: TestClient, session_id: str
) -> None:
    _create(client, session_id)
    body = {"items": [user_msg("one"), assistant_msg("two")], "idempotency_key": "turn-7"}
    first = client.post(f"/sessions/{session_id}/items", json=body)
    second = client.post(f"/sessions/{session_id}/items", json=body)
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json() == first.json()
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 2


def test_an_idempotency_key_reused_for_another_batch_is_refused(
    client: TestClient, session_id: str
) -> None:
    _create(client, session_id)
    body = {"items": [user_msg("one"), assistant_msg("two")], "idempotency_key": "turn-7"}
    first = client.post(f"/sessions/{session_id}/items", json=body)
    assert first.status_code == 201
    others = [
        {**body, "items": [user_msg("one"), assistant_msg("three")]},
        {**body, "items": [user_msg("one")]},
        {**body, "items": [*body["items"], user_msg("four")]},
        {**body, "unit": "planner"},
        {**body, "metadata": {"harness_authored": True}},
        {**body, "format": "chat", "items": [{"role": "user", "content": "one"}]},
    ]
    for other in others:
        refused = client.post(f"/sessions/{session_id}/items", json=other)
        assert refused.status_code == 422, (other, refused.text)
        assert refused.json()["error"] == {
            "code": "idempotency_mismatch",
            "message": "idempotency key 'turn-7' was used for a different batch (seqs 1-2); "
            "nothing was written: a retry must repeat the batch, new items need a new key",
            "details": [
                {
                    "loc": ["body", "idempotency_key"],
                    "msg": "key 'turn-7' names seqs 1-2, another batch",
                }
            ],
        }
    # The same batch, even after the session moved on, still replays the original answer.
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("next")]})
    replay = client.post(f"/sessions/{session_id}/items", json={**body, "expected_last_seq": 2})
    assert (replay.status_code, replay.json()) == (200, first.json())
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [entry["item"] for entry in logged] == [*body["items"], user_msg("next")]


@pytest.mark.parametrize("fmt", ["chat", "anthropic"])
def test_append_in_other_formats_stores_responses_items(
    client: TestClient, session_id: str, fmt: str
) -> None:
    _create(client, session_id)
    if fmt == "chat":
        items: list[dict[str, Any]] = [
            {"role": "user", "content": "list files"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "sh", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
        ]
    else:
        items = [
            {"role": "user", "content": "list files"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "sh", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.py"}],
            },
        ]
    response = client.post(f"/sessions/{session_id}/items", json={"items": items, "format": fmt})
    assert response.status_code == 201, response.text
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert [(e["type"], e["item"].get("call_id")) for e in logged] == [
        ("message", None),
        ("function_call", "call_1"),
        ("function_call_output", "call_1"),
    ]


def test_every_trajectory_appends_losslessly(client: TestClient, session_id: str) -> None:
    for path in TRAJECTORIES:
        name = f"{session_id}-{path.stem}"[:200]
        _create(client, name)
        items = load_trajectory(path)
        assert client.post(f"/sessions/{name}/items", json={"items": items}).status_code == 201
        logged = client.get(f"/sessions/{name}/items", params={"limit": 1000}).json()["items"]
        assert [entry["item"] for entry in logged] == items


def test_other_tenants_session_answers_404_like_a_missing_one(
    postgres_url: str, session_id: str
) -> None:
    settings = Settings(database_url=postgres_url, api_keys=["alpha:key-alpha", "beta:key-beta"])
    with TestClient(create_app(settings)) as service:
        _check_isolation(service, session_id)


def _check_isolation(service: TestClient, session_id: str) -> None:
    alpha = {"Authorization": "Bearer key-alpha"}
    beta = {"Authorization": "Bearer key-beta"}
    assert (
        service.post("/sessions", json={"session_id": session_id}, headers=alpha).status_code == 201
    )
    service.post(
        f"/sessions/{session_id}/items", json={"items": [user_msg("secret")]}, headers=alpha
    )
    missing = service.get("/sessions/no-such-session", headers=beta)
    for response in (
        service.get(f"/sessions/{session_id}", headers=beta),
        service.get(f"/sessions/{session_id}/items", headers=beta),
        service.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("x")]}, headers=beta
        ),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    # The same id is free for the other tenant: ids are per tenant and nothing leaks.
    assert (
        service.post("/sessions", json={"session_id": session_id}, headers=beta).status_code == 201
    )
    assert service.get(f"/sessions/{session_id}/items", headers=beta).json()["items"] == []


def test_missing_or_unknown_key_is_401_with_a_bearer_challenge(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, api_keys=["alpha:key-alpha"])
    cases = {
        "none": (
            {},
            'Bearer realm="contextd"',
            "missing API key: send 'Authorization: Bearer <key>'",
        ),
        "unknown": (
            {"Authorization": "Bearer wrong"},
            'Bearer realm="contextd", error="invalid_token"',
            "unknown API key",
        ),
        "basic": (
            {"Authorization": "Basic abc"},
            'Bearer realm="contextd"',
            "the Basic scheme is not accepted: send 'Bearer <key>'",
        ),
        "empty": (
            {"Authorization": "Bearer "},
            'Bearer realm="contextd", error="invalid_request"',
            "malformed Authorization header: expected 'Bearer <key>'",
        ),
    }
    with TestClient(create_app(settings)) as service:
        for headers, challenge, message in cases.values():
            response = service.get("/sessions/anything", headers=headers)
            assert (
                response.status_code,
                response.headers.get("www-authenticate"),
                response.json(),
            ) == (
                401,
                challenge,
                {"error": {"code": "unauthorized", "message": message, "details": None}},
            )


def test_error_shapes(client: TestClient, session_id: str) -> None:
    _create(client, session_id)
    malformed = client.post(
        f"/sessions/{session_id}/items",
        content=b'{"items": [',
        headers={"content-type": "application/json"},
    )
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (400, "malformed_json")
    invalid = client.post(f"/sessions/{session_id}/items", json={"items": ["not an object"]})
    assert invalid.status_code == 422
    assert invalid.json()["error"]["code"] == "validation_error"
    assert invalid.json()["error"]["details"][0]["loc"] == ["body", "items", 0]
    unknown_route = client.get("/nowhere")
    assert unknown_route.json() == {
        "error": {"code": "not_found", "message": "Not Found", "details": None}
    }
    wrong_method = client.delete(f"/sessions/{session_id}")
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (
        405,
        "method_not_allowed",
    )
    empty = client.post(f"/sessions/{session_id}/items", json={"items": []})
    assert empty.status_code == 422


def test_body_and_item_limits_answer_413_with_the_limit(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, max_body_bytes=2000, max_item_bytes=500)
    with TestClient(create_app(settings)) as service:
        service.post("/sessions", json={"session_id": session_id})
        body = service.post(f"/sessions/{session_id}/items", json={"items": [user_msg("x" * 3000)]})
        assert body.status_code == 413
        assert "2000 bytes" in body.json()["error"]["message"]
        items = [user_msg("fine"), user_msg("x" * 900)]
        item = service.post(f"/sessions/{session_id}/items", json={"items": items})
        assert item.status_code == 413
        # Issue 46: which item, counted both ways, and the setting that raises the limit.
        size = len(json.dumps(items[1], separators=(",", ":")))
        assert item.json()["error"]["message"] == (
            f"items[1] (item 2 of the batch) is {size:,} bytes of JSON; the limit is 500 bytes "
            "(CTX_MAX_ITEM_BYTES); store large content elsewhere and append a reference to it"
        )
        assert service.get(f"/sessions/{session_id}").json()["last_seq"] == 0


def test_a_key_sent_to_a_service_without_keys_is_told_it_has_none(
    client: TestClient, session_id: str
) -> None:
    """Issue 46: an open service answered a request that sent a key with a bare 401."""
    refused = client.post(
        "/sessions", json={"session_id": session_id}, headers={"Authorization": "Bearer k1"}
    )
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == (
        "unknown API key: this service has no keys (it serves without one, as tenant "
        "'default'); send no Authorization header, or create a key with `contextd create-key`"
    )
    missing = client.get(f"/sessions/{session_id}")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == (
        f"session {session_id!r} not found; create it with POST /sessions"
    )


def test_database_down_answers_503_with_retry_after() -> None:
    # A real connection attempt to a port where no database listens.
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/none"
    with TestClient(
        create_app(Settings(database_url=unreachable, db_timeout_seconds=1))
    ) as service:
        response = service.get("/sessions/x")
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"]["code"] == "database_unavailable"
        assert service.get("/readyz").status_code == 503


def test_health_ready_and_metrics(client: TestClient, session_id: str) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    _create(client, session_id)
    client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("hi")], "unit": "u1", "phase": "p1"},
    )
    text = client.get("/metrics").text
    assert 'contextd_appended_tokens_total{phase="p1",unit="u1"}' in text
    assert (
        'contextd_http_requests_total{method="POST",route="/sessions/{session_id}/items",status="201"}'
        in text
    )


def test_a_nul_character_is_a_clear_422_and_writes_nothing(
    client: TestClient, session_id: str
) -> None:
    named = client.post("/sessions", json={"session_id": session_id, "model": "gpt\u0000x"})
    in_path = client.get("/sessions/a%00b")
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    typed = client.post(
        f"/sessions/{session_id}/items", json={"items": [{"type": "bad\u0000type"}]}
    )
    assert [(r.status_code, r.json()["error"]["code"]) for r in (named, in_path, typed)] == [
        (422, "validation_error"),
        (404, "not_found"),  # no session can be called that
        (422, "unstorable_value"),  # item types are free text to the schema
    ]
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 0


def test_a_session_sets_its_own_watermarks_and_inverted_ones_are_refused(
    client: TestClient, session_id: str
) -> None:
    own = _create(client, session_id, context_window=10_000, compaction={"low_watermark": 0.4})
    assert (own["usable_window"], own["compaction"]) == (
        5_000,  # the reserve never takes more than half the window
        {"high_watermark": 0.9, "low_watermark": 0.4},
    )
    assert client.get(f"/sessions/{session_id}").json()["compaction"] == own["compaction"]

    refused = [
        {"high_watermark": 0.5, "low_watermark": 0.6},  # inverted
        {"low_watermark": 0.95},  # inverted against the service's high watermark
        {"high_watermark": 1.5},  # out of range
        {"low_watermark": 0},
        {"high_watermark": "high"},
        {"auto": True},  # unknown option
    ]
    for n, compaction in enumerate(refused):
        answer = client.post(
            "/sessions", json={"session_id": f"{session_id}-{n}", "compaction": compaction}
        )
        assert answer.status_code == 422, (compaction, answer.text)
        assert client.get(f"/sessions/{session_id}-{n}").status_code == 404


def _create_at_once(service: TestClient, body: dict[str, Any], *, callers: int) -> list[int]:
    """The statuses of `callers` identical creations released together."""
    start = threading.Barrier(callers)

    def create(_: int) -> int:
        start.wait()
        return service.post("/sessions", json=body).status_code

    with ThreadPoolExecutor(callers) as pool:
        return sorted(pool.map(create, range(callers)))


@pytest.mark.parametrize("engine", ["postgresql", "sqlite"])
def test_concurrent_identical_creations_all_succeed(
    request: pytest.FixtureRequest, session_id: str, engine: str
) -> None:
    url = request.getfixturevalue("postgres_url" if engine == "postgresql" else "sqlite_url")
    callers = 8
    with TestClient(create_app(Settings(database_url=url))) as service:
        for trial in range(10):
            body = {"session_id": f"{session_id}-{trial}", "model": "m", "metadata": {"k": 1}}
            statuses = _create_at_once(service, body, callers=callers)
            assert statuses == [200] * (callers - 1) + [201], (trial, statuses)
            different = service.post("/sessions", json={**body, "model": "other"})
            assert different.status_code == 409
