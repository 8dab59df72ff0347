"""What the service adds for the provider and keeps of what the provider sent, over HTTP on
PostgreSQL: the raw log's original messages, Anthropic cache breakpoints, OpenAI cache keys."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.domain.formats import ORIGIN_KEY
from app.domain.world_state import GOAL_RESTATED_AFTER_TOKENS
from tests.builders import long_text, tool_call, tool_output, user_msg

EPHEMERAL = {"type": "ephemeral"}


def _session(client: TestClient, session_id: str) -> None:
    created = client.post("/sessions", json={"session_id": session_id, "context_window": 200_000})
    assert created.status_code == 201, created.text


def _append(client: TestClient, session_id: str, items: list[Any], fmt: str = "responses") -> Any:
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items, "format": fmt})
    assert appended.status_code == 201, appended.text
    return appended.json()


def _assemble(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, **body})
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _marked(system: list[dict[str, Any]] | None, messages: list[dict[str, Any]]) -> list[Any]:
    """(message index or None for system, block index) of every block with cache_control."""
    marked: list[Any] = [
        (None, b) for b, block in enumerate(system or []) if "cache_control" in block
    ]
    for m, message in enumerate(messages):
        if isinstance(message["content"], list):
            marked += [
                (m, b) for b, block in enumerate(message["content"]) if "cache_control" in block
            ]
    return marked


def test_the_raw_log_keeps_each_message_as_sent_once(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "two reads", "signature": "c2ln"},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b"}},
        ],
    }
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "no such file",
                "is_error": True,
            },
        ],
    }
    messages = [{"role": "user", "content": "read a and b"}, assistant, results]
    appended = _append(client, session_id, messages, fmt="anthropic")
    assert [entry["type"] for entry in appended["items"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    logged = client.get(f"/sessions/{session_id}/items").json()["items"]
    first = appended["first_seq"]
    assert [entry["original"] for entry in logged] == [
        {"format": "anthropic", "message": messages[0], "parts": 1},
        {"format": "anthropic", "message": assistant, "parts": 3},
        {"format": "anthropic", "part": 1, "message_seq": first + 1},
        {"format": "anthropic", "part": 2, "message_seq": first + 1},
        {"format": "anthropic", "message": results, "parts": 2},
        {"format": "anthropic", "part": 1, "message_seq": first + 4},
    ]
    # The Responses form used internally carries what it has no field for.
    assert logged[5]["item"] == {
        "type": "function_call_output",
        "call_id": "toolu_2",
        "output": "no such file",
        ORIGIN_KEY: {"format": "anthropic", "fields": {"is_error": True}},
    }
    # Back to Anthropic, the history is what was sent.
    history = client.get(f"/sessions/{session_id}/history?output_format=anthropic").json()
    assert (history["items"], history["report"]["dropped_fields"]) == (messages, [])
    # Items sent as Responses are their own original.
    _append(client, session_id, [user_msg("thanks")])
    page = client.get(f"/sessions/{session_id}/items?after_seq={first + 5}").json()
    assert page["items"][0]["original"] is None


def test_anthropic_assembly_marks_the_prefix_the_shared_part_and_the_history_end(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    client.put(f"/sessions/{session_id}/goal", json={"text": "Make the export UTF-8."})
    client.put(
        f"/sessions/{session_id}/world-state", json={"sections": {"rules": "No force pushes."}}
    )
    _append(
        client, session_id, [user_msg("Fix the export."), tool_call("c1", "sh", '{"cmd":"ls"}')]
    )
    # A long output: past it the goal is restated at the end.
    listing = "a.py b.py" + long_text(GOAL_RESTATED_AFTER_TOKENS)
    _append(client, session_id, [tool_output("c1", listing)])
    first = _assemble(client, session_id, output_format="anthropic")
    assert first["system"] == [
        {"type": "text", "text": first["items"][0]["content"]},
        {"type": "text", "text": first["items"][1]["content"], "cache_control": EPHEMERAL},
    ]
    history_end = max(i["position"] for i in first["items"] if i["source"] == "history")
    assert first["cache_breakpoints"] == [
        {
            "reason": "stable_prefix",
            "position": 1,
            "item_id": first["items"][1]["id"],
            "message": None,
            "block": 1,
        },
        {
            "reason": "history_end",
            "position": history_end,
            "item_id": first["items"][history_end]["id"],
            "message": 2,
            "block": 0,
        },
    ]
    # The restated goal closes the last user turn, after the tool result.
    assert first["messages"][-1]["content"][-1] == {
        "type": "text",
        "text": first["items"][-1]["content"],
    }
    assert first["messages"][-1]["content"][0]["type"] == "tool_result"

    _append(
        client,
        session_id,
        [tool_call("c2", "sh", '{"cmd":"cat a.py"}'), tool_output("c2", "print()")],
    )
    second = _assemble(client, session_id, output_format="anthropic")
    reasons = [(b["reason"], b["item_id"]) for b in second["cache_breakpoints"]]
    shared = second["cache"]["last_reused_item_id"]
    assert shared == first["items"][history_end]["id"]
    assert reasons == [
        ("stable_prefix", second["items"][1]["id"]),
        ("previous_call", shared),
        ("history_end", second["items"][-2]["id"]),
    ]
    assert _marked(second["system"], second["messages"]) == [
        (b["message"], b["block"]) for b in second["cache_breakpoints"]
    ]
    assert second["prompt_cache_key"] is None


def test_client_breakpoints_give_way_to_the_services(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    marked_turns = [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"turn {n}", "cache_control": EPHEMERAL}],
        }
        for n in range(5)
    ]
    _append(client, session_id, marked_turns, fmt="anthropic")
    client.put(f"/sessions/{session_id}/goal", json={"text": "Summarise the turns."})
    answer = _assemble(client, session_id, output_format="anthropic")
    marked = _marked(answer["system"], answer["messages"])
    assert len(marked) == 4
    own = [(b["message"], b["block"]) for b in answer["cache_breakpoints"]]
    assert set(own) <= set(marked)
    # One of the five gave way when the history was written (four at most), one more to the
    # system breakpoint; the history's end already carried the client's last one.
    assert own == [(None, 0), (4, 0)]
    assert answer["conversion"]["dropped_fields"] == [{"index": 0, "field": "cache_control"}] * 2
    assert marked == [(None, 0), (2, 0), (3, 0), (4, 0)]


def test_openai_outputs_carry_a_stable_cache_key_per_session_and_unit(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    _append(client, session_id, [user_msg("hello")])
    keys = {
        (fmt, unit): _assemble(client, session_id, output_format=fmt, unit=unit)["prompt_cache_key"]
        for fmt in ("chat", "responses")
        for unit in ("planner", "coder")
    }
    again = _assemble(client, session_id, output_format="chat", unit="planner")["prompt_cache_key"]
    assert again == keys[("chat", "planner")] == keys[("responses", "planner")]
    assert keys[("chat", "coder")] == keys[("responses", "coder")] != again
    assert all(isinstance(key, str) and key.startswith("pck_") for key in keys.values())
    # Stateless assembly has no lineage to key.
    stateless = client.post("/assemble", json={"sources": [], "output_format": "chat"}).json()
    assert stateless["prompt_cache_key"] is None
