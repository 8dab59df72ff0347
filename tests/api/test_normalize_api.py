"""`POST /history/normalize` and `GET /sessions/{id}/history` over HTTP, on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.formats import to_responses
from app.domain.items import Format
from app.domain.normalize import (
    MEDIA_PLACEHOLDERS,
    SYNTHETIC_OUTPUT_TEXT,
    find_pairing_violations,
    synthetic_output_id,
)
from app.tokens import token_counter
from tests.builders import assistant_msg, system_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory

EMPTY_REPORT: dict[str, list[Any]] = {
    "synthesized_outputs": [],
    "removed_orphans": [],
    "reordered_outputs": [],
    "deduplicated_outputs": [],
    "stripped_media": [],
    "truncated_outputs": [],
    "excluded": [],
    "dropped_fields": [],
    "placeholders": [],
}


def _normalize(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/history/normalize", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_normalize_repairs_a_broken_history_and_reports_every_repair(client: TestClient) -> None:
    unanswered = {**tool_call("c1", "ls"), "id": "fc_1"}
    items = [
        system_msg("you are terse"),
        user_msg("list files"),
        unanswered,
        tool_output("ghost", "nobody asked"),
        assistant_msg("done"),
    ]
    result = _normalize(client, items=items)
    synthesized = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": SYNTHETIC_OUTPUT_TEXT,
        "id": synthetic_output_id("function", call_item_id="fc_1", call_id="c1"),
    }
    assert result["items"] == [
        user_msg("list files"),
        unanswered,
        synthesized,
        assistant_msg("done"),
    ]
    assert result["report"] == {
        **EMPTY_REPORT,
        "synthesized_outputs": [{"call_id": "c1", "id": synthesized["id"], "index": 2}],
        "removed_orphans": [{"call_id": "ghost", "index": 3}],
        "excluded": [{"index": 0, "type": "message", "reason": "system_message", "detail": None}],
    }
    assert result["untranslated"] == []
    again = _normalize(client, items=result["items"])
    assert (again["items"], again["report"]) == (result["items"], EMPTY_REPORT)


def test_normalize_is_byte_identical_for_the_same_request(client: TestClient) -> None:
    body = {"items": [user_msg("a"), tool_call("c1"), user_msg("b"), tool_output("c1", "x" * 500)]}
    first = client.post("/history/normalize", json=body)
    second = client.post("/history/normalize", json=body)
    assert first.content == second.content


def test_normalize_moves_late_output_and_truncates_long_output(client: TestClient) -> None:
    long_output = "\n".join(f"line {n}: " + "word " * 20 for n in range(400))
    items = [
        user_msg("go"),
        tool_call("c1"),
        user_msg("interjection"),
        tool_output("c1", long_output),
    ]
    result = _normalize(
        client,
        items=items,
        truncation={"mode": "tokens", "limit": 100, "serialization_margin": 1.2},
    )
    kinds = [(item["type"], item.get("call_id")) for item in result["items"]]
    assert kinds == [
        ("message", None),
        ("function_call", "c1"),
        ("function_call_output", "c1"),
        ("message", None),
    ]
    kept = result["items"][2]["output"]
    assert kept.startswith("line 0: word")
    assert kept.endswith("line 399: " + "word " * 19 + "word ")
    assert "tokens omitted" in kept
    assert result["report"]["reordered_outputs"] == [
        {"call_id": "c1", "from_index": 3, "to_index": 2}
    ]
    [truncated] = result["report"]["truncated_outputs"]
    assert truncated["call_id"] == "c1"
    assert truncated["kept_tokens"] < truncated["original_tokens"]
    assert kept_text_tokens(kept) <= 120  # the limit, with its margin: the marker on top


def test_normalize_strips_images_only_when_unsupported(client: TestClient) -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}
    message = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "see"}, image],
    }
    supported = _normalize(client, items=[message], input_modalities=["text", "image"])
    assert (supported["items"], supported["report"]) == ([message], EMPTY_REPORT)
    text_only = _normalize(client, items=[message], input_modalities=["text"])
    placeholder = {"type": "input_text", "text": MEDIA_PLACEHOLDERS["image"]}
    assert text_only["items"] == [{**message, "content": [message["content"][0], placeholder]}]
    assert text_only["report"] == {
        **EMPTY_REPORT,
        "stripped_media": [{"index": 0, "kind": "image"}],
    }


def test_normalize_chat_history_answers_in_chat(client: TestClient) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                {"id": "call_b", "type": "function", "function": {"name": "w", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
    ]
    result = _normalize(client, items=messages, format="chat")
    assert result["items"] == [
        {"role": "user", "content": "weather?"},
        messages[2],
        # The synthesized answer sits right after its own call, before the batch's late answers.
        {"role": "tool", "tool_call_id": "call_b", "content": SYNTHETIC_OUTPUT_TEXT},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
    ]
    assert [s["call_id"] for s in result["report"]["synthesized_outputs"]] == ["call_b"]


def test_normalize_anthropic_history_pairs_tool_use_with_tool_result(client: TestClient) -> None:
    messages = [
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "read", "input": {"p": "a.py"}}],
        },
        {"role": "user", "content": "never mind"},
    ]
    result = _normalize(client, items=messages, format="anthropic")
    assert result["items"] == [
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "read", "input": {"p": "a.py"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": SYNTHETIC_OUTPUT_TEXT},
                {"type": "text", "text": "never mind"},
            ],
        },
    ]


@pytest.mark.parametrize("fmt", ["responses", "chat", "anthropic"])
def test_every_trajectory_normalizes_to_a_paired_history_in_every_format(
    client: TestClient, fmt: Format
) -> None:
    for path in TRAJECTORIES:
        items = load_trajectory(path)[: len(load_trajectory(path)) * 2 // 3]
        result = _normalize(client, items=items, output_format=fmt)
        back = to_responses(result["items"], fmt)
        assert find_pairing_violations(back.items) == [], path.name


def test_session_history_is_a_projection_and_the_log_keeps_everything(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id})
    big = "data " * 3000
    appended = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("go"), tool_call("c1"), tool_output("c1", big), tool_call("c2")]},
    )
    assert appended.status_code == 201
    limited = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [tool_output("c2", big)], "metadata": {"truncation_token_limit": 50}},
    )
    assert limited.status_code == 201
    history = client.get(f"/sessions/{session_id}/history").json()
    outputs = [
        item["output"] for item in history["items"] if item["type"] == "function_call_output"
    ]
    assert outputs[0] == big
    assert outputs[1] != big
    assert kept_text_tokens(outputs[1]) <= 50
    assert history["compaction_id"] is None
    via_normalize = _normalize(client, session_id=session_id)
    assert {k: v for k, v in history.items() if k != "compaction_id"} == via_normalize
    raw = client.get(f"/sessions/{session_id}/items").json()["items"]
    assert raw[-1]["item"] == tool_output("c2", big)
    detail = client.get(f"/sessions/{session_id}").json()
    assert detail["active_tokens"] == history["tokens"]


count_o200k = token_counter("o200k_base")


def kept_text_tokens(cut: str) -> int:
    """The tokens of what a truncated output kept of its text: its head and tail, not its
    marker."""
    head, rest = cut.split("[…", 1)
    return count_o200k(head + rest.split("…]", 1)[1])


def test_a_per_item_limit_keeps_that_much_text_and_names_the_fact_on_top(
    client: TestClient, session_id: str
) -> None:
    """Issue 43: with `truncation_token_limit: 16` the output kept 13 bytes, 7 of head and 6 of
    tail, the marker naming the fact counted inside the limit."""
    client.post("/sessions", json={"session_id": session_id})
    text = "".join(f"line {n}: value={n * 7919 % 10007}\n" for n in range(400))
    appended = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("go"), tool_call("c1")]},
    )
    assert appended.status_code == 201
    limited = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [tool_output("c1", text)], "metadata": {"truncation_token_limit": 16}},
    )
    assert limited.status_code == 201
    (output,) = [
        item["output"]
        for item in client.get(f"/sessions/{session_id}/history").json()["items"]
        if item["type"] == "function_call_output"
    ]
    head, rest = output.split("[…", 1)
    marker, tail = rest.split("…]", 1)
    assert (text.startswith(head), text.endswith(tail)) == (True, True)
    assert 15 <= kept_text_tokens(output) <= 16
    omitted = count_o200k(text) - count_o200k(head + tail)
    assert marker == f" {omitted} tokens omitted; the whole output is fact seq 3 "


def test_normalize_bad_input_is_a_clear_4xx(client: TestClient) -> None:
    both = client.post("/history/normalize", json={"items": [], "session_id": "x"})
    neither = client.post("/history/normalize", json={})
    not_object = client.post("/history/normalize", json={"items": [1]})
    missing = client.post("/history/normalize", json={"session_id": "no-such-session"})
    bad_modality = client.get("/sessions/x/history", params={"input_modalities": "text,smell"})
    assert [r.status_code for r in (both, neither, not_object, missing, bad_modality)] == [
        422,
        422,
        422,
        404,
        422,
    ]


def test_malformed_items_are_excluded_and_reported_without_a_500(client: TestClient) -> None:
    items = [
        {"type": "function_call", "name": "sh", "arguments": "not json"},
        {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": "{not json"},
        {"type": "function_call_output", "call_id": "c1", "output": {"weird": True}},
        {"type": "message", "role": "user", "content": [{"type": "hologram", "data": 1}]},
    ]
    result = _normalize(client, items=items)
    output_id = synthetic_output_id("function", call_item_id=None, call_id="c1")
    # Text that is not JSON is still text, and a part of an unknown type still a part; an
    # output that is an object is no output: the call gets a synthesized one.
    assert result["items"] == [
        items[1],
        {
            "type": "function_call_output",
            "id": output_id,
            "call_id": "c1",
            "output": SYNTHETIC_OUTPUT_TEXT,
        },
        items[3],
    ]
    assert result["report"]["excluded"] == [
        {"index": 0, "type": "function_call", "reason": "call_without_call_id", "detail": None},
        {
            "index": 2,
            "type": "function_call_output",
            "reason": "malformed",
            "detail": "function_call_output output is an object, not text or a list of parts",
        },
    ]


def test_normalize_repairs_are_counted_in_metrics(client: TestClient) -> None:
    def synthesized_count() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith('contextd_normalize_repairs_total{kind="synthesized_outputs"}'):
                return float(line.split()[-1])
        return 0.0

    before = synthesized_count()
    _normalize(client, items=[tool_call("c9")])
    assert synthesized_count() == before + 1
