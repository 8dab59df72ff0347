"""Restorable context over HTTP on PostgreSQL: the recall tool every session-mode assembly offers
(the same bytes on every call, in each provider's own tool shape), what a context leaves out
listed in `elided` and named in the text the model reads, and the newest output kept in view
however small the window."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.items import FORMATS, Format
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.providers import tool_violations


def _session(client: TestClient, session_id: str, **attributes: Any) -> None:
    created = client.post("/sessions", json={"session_id": session_id, **attributes})
    assert created.status_code == 201, created.text


def _append(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _assemble(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, **body})
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    return result


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_recall_tool_is_the_same_bytes_on_every_call_and_the_sdk_accepts_it(
    client: TestClient, session_id: str, fmt: Format
) -> None:
    _session(client, session_id)
    seen = []
    for turn in range(3):
        _append(
            client,
            session_id,
            [
                user_msg(f"step {turn}"),
                tool_call(f"c{turn}", arguments='{"cmd": "ls"}'),
                tool_output(f"c{turn}", "a.py\n" * (50 * turn + 1)),
                assistant_msg("done"),
            ],
        )
        answer = _assemble(client, session_id, output_format=fmt)
        seen.append(json.dumps(answer["tools"]))
        assert len(answer["tools"]) == 1
        assert tool_violations(fmt, answer["tools"]) == []
    assert len(set(seen)) == 1
    tool = json.loads(seen[0])[0]
    name = tool["function"]["name"] if fmt == "chat" else tool["name"]
    assert name == "context_recall"
    # The definition counts against the window: what the context may fill is less by its size.
    answer = _assemble(client, session_id, output_format=fmt)
    assert answer["tools_tokens"] > 0
    assert answer["total_tokens"] + answer["tools_tokens"] <= answer["budget"]["max_tokens"]


def test_the_recall_tool_is_off_by_request_or_by_session(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    _append(client, session_id, [user_msg("hello")])
    off = _assemble(client, session_id, recall_tool=False)
    assert (off["tools"], off["tools_tokens"]) == ([], 0)
    quiet = f"{session_id}-quiet"
    _session(client, quiet, recall_tool=False)
    assert client.get(f"/sessions/{quiet}").json()["recall_tool"] is False
    _append(client, quiet, [user_msg("hello")])
    assert _assemble(client, quiet)["tools"] == []
    assert len(_assemble(client, quiet, recall_tool=True)["tools"]) == 1
    # Stateless assembly has no log to recall from.
    stateless = client.post(
        "/assemble", json={"sources": [{"source": "s", "items": [{"id": "a", "content": "x"}]}]}
    )
    assert stateless.json()["tools"] == []
