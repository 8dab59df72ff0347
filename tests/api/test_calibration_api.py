"""Budgets in the provider's tokens over HTTP, on PostgreSQL: a session's tokenizer family from
its model, the conservative default ratio, and the windows, estimates and pressure that follow
it."""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi.testclient import TestClient

from tests.builders import tool_call, tool_output, user_msg

# 20,000 tokens of window less the default 16,000 reserve, capped at half the window.
CONTEXT_WINDOW = 20_000
USABLE = 10_000
CLAUDE_DEFAULT = {
    "family": "anthropic",
    "ratio": 1.35,
    "calibrated": False,
    "samples": 0,
    "exact": False,
}


def _session(client: TestClient, session_id: str, model: str, **options: Any) -> dict[str, Any]:
    body = {"session_id": session_id, "context_window": CONTEXT_WINDOW, "model": model, **options}
    created = client.post("/sessions", json=body)
    assert created.status_code == 201, created.text
    answer: dict[str, Any] = created.json()
    return answer


def _turn(number: int, words: int) -> list[dict[str, Any]]:
    """One model call and its result: a shell command and an output of about `words` tokens."""
    call_id = f"call-{number}"
    output = " ".join(f"w{number}x{k}" for k in range(words // 3))
    return [
        tool_call(call_id, "bash", json.dumps({"command": f"make step{number}"})),
        tool_output(call_id, output),
    ]


def _append(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _get(client: TestClient, path: str) -> dict[str, Any]:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _assemble(client: TestClient, session_id: str, **request: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, **request})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _window(ratio: float) -> int:
    return math.floor(round(USABLE / ratio, 6))


def _estimate(tokens: int, ratio: float) -> int:
    return math.ceil(round(tokens * ratio, 6))


def test_an_uncalibrated_claude_session_budgets_at_the_default_ratio(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "claude-sonnet-4-5")
    assert (created["usable_window"], created["tokenizer"]) == (USABLE, CLAUDE_DEFAULT)
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600), *_turn(2, 600)])

    detail = _get(client, f"/sessions/{session_id}")
    assembled = _assemble(client, session_id)
    advice = _get(client, f"/sessions/{session_id}/compaction-advice")
    window = _get(client, f"/sessions/{session_id}/context-window")

    active = detail["active_tokens"]
    # No goal or world state: the active context is the history, and assembly fits all of it.
    assert assembled["total_tokens"] == active
    assert (detail["provider_tokens_estimate"], detail["tokenizer"]) == (
        _estimate(active, 1.35),
        CLAUDE_DEFAULT,
    )
    assert {
        key: assembled[key]
        for key in ("provider_tokens_estimate", "encoding", "tokenizer", "budget")
    } == {
        "provider_tokens_estimate": _estimate(active, 1.35),
        "encoding": "o200k_base",
        "tokenizer": CLAUDE_DEFAULT,
        "budget": {
            "max_items": 12,
            "max_tokens": _window(1.35),
            "max_items_per_source": 6,
            "max_tokens_per_source": 2500,
        },
    }
    assert advice == {
        "should_compact": False,
        "pressure": active / _window(1.35),
        "reasons": [],
        "turns_until_full": advice["turns_until_full"],
        "recommended_strategy": None,
        "active_tokens": active,
        "provider_tokens_estimate": _estimate(active, 1.35),
        "tokenizer": CLAUDE_DEFAULT,
    }
    assert window == {
        "session_id": session_id,
        "context_window": CONTEXT_WINDOW,
        "usable_window": USABLE,
        "window_tokens": _window(1.35),
        "active_tokens": active,
        "provider_tokens_estimate": _estimate(active, 1.35),
        "by_source_class": {"history": active},
        "pressure": advice["pressure"],
        "tokenizer": CLAUDE_DEFAULT,
    }
