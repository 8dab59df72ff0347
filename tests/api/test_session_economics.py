"""The session loop's economics over HTTP, on PostgreSQL: one usable window, hysteresis, stable
cuts and a prefix that world-state updates do not move."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from app.domain.items import visible_text
from app.tokens import token_counter
from tests.builders import tool_call, tool_output, user_msg

count = token_counter("o200k_base")
# 20,000 tokens of window less the default 16,000 reserve, capped at half the window.
CONTEXT_WINDOW = 20_000
USABLE = 10_000


def _session(client: TestClient, session_id: str, **options: Any) -> None:
    body = {"session_id": session_id, "context_window": CONTEXT_WINDOW, **options}
    created = client.post("/sessions", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["usable_window"] == USABLE
    goal = client.put(f"/sessions/{session_id}/goal", json={"text": "Make the export UTF-8."})
    assert goal.status_code == 200, goal.text


def _turn(number: int, words: int, *, error: str = "") -> list[dict[str, Any]]:
    """One model call and its result: a shell command and an output of about `words` tokens."""
    call_id = f"call-{number}"
    output = f"{error}\n" + " ".join(f"w{number}x{k}" for k in range(words // 3))
    return [
        tool_call(call_id, "bash", json.dumps({"command": f"make step{number}"})),
        tool_output(call_id, output),
    ]


def _append(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _assemble(client: TestClient, session_id: str) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _history(body: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(e["id"], e["decision"], e["reason"]) for e in body["plan"] if e["source"] == "history"]


def test_advice_and_assembly_weigh_one_usable_window(client: TestClient, session_id: str) -> None:
    _session(client, session_id)
    _append(client, session_id, [user_msg("Fix the export.")])
    number = 0
    while True:
        body = _assemble(client, session_id)
        advice = body["advice"]
        # Nothing is cut while the advice is calm: the pressure it reports is the assembled
        # context (history, pinned goal and its restatement) and the tool definitions sent
        # beside it, against the window assembly fits.
        assert all(decision == "selected" for _, decision, _ in _history(body))
        assert advice["pressure"] == (body["total_tokens"] + body["tools_tokens"]) / USABLE
        if advice["should_compact"]:
            break
        number += 1
        _append(client, session_id, _turn(number, 400))
    assert advice["reasons"][0]["signal"] == "window_pressure"
    assert 0.9 <= advice["pressure"] < 1
    assert body["budget"]["max_tokens"] == USABLE


def test_no_second_compaction_is_advised_right_after_one(
    client: TestClient, session_id: str
) -> None:
    # A session's own low watermark: compactions bring it to 40% of the window.
    _session(client, session_id, compaction={"low_watermark": 0.4})
    _append(client, session_id, [user_msg("Fix the export.")])
    for number in range(1, 20):
        _append(client, session_id, _turn(number, 450, error="error: disk full"))
    before = _assemble(client, session_id)["advice"]
    assert before["should_compact"]
    assert before["recommended_strategy"] == "clear_tool_results"

    compacted = client.post(
        "/compact", json={"session_id": session_id, "strategy": before["recommended_strategy"]}
    )
    assert compacted.status_code == 201, compacted.text
    # Masking cleared the oldest outputs until the context was at the low watermark, no
    # further: the newest outputs are still whole.
    after = _assemble(client, session_id)
    assert 0.3 * USABLE < after["total_tokens"] <= 0.4 * USABLE
    outputs = [i["item"] for i in after["items"] if i["item"] and "output" in i["item"]]
    assert "cleared by contextd" not in outputs[-1]["output"]

    # The loop goes on (the same error in every output) and the context grows back past half
    # the window: no compaction is advised until it is back at the high watermark.
    number = 20
    advised: list[tuple[float, bool]] = []
    while not advised or not advised[-1][1]:
        _append(client, session_id, _turn(number, 450, error="error: disk full"))
        advice = _assemble(client, session_id)["advice"]
        advised.append((advice["pressure"], advice["should_compact"]))
        number += 1
    assert any(pressure >= 0.5 for pressure, _ in advised[:-1])
    assert all(not should for _, should in advised[:-1])
    assert advised[-1][0] >= 0.9


def test_a_history_that_no_longer_fits_is_cut_at_points_that_stay_put(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    _append(client, session_id, [user_msg("Fix the export.")])
    starts: list[str] = []
    reused: list[int] = []
    for number in range(1, 60):
        _append(client, session_id, _turn(number, 500))
        body = _assemble(client, session_id)
        kept = [i["id"] for i in body["items"] if i["source"] == "history"]
        starts.append(kept[0])
        reused.append(body["cache"]["reused_prefix_tokens"])
        if any(reason == "history_cut" for _, _, reason in _history(body)):
            cut = [r for r in body["advice"]["reasons"] if r["signal"] == "history_cut"]
            assert body["advice"]["should_compact"]
            assert len(cut) == 1
        assert body["total_tokens"] <= USABLE
    history_tokens = sum(e["tokens"] for e in body["plan"] if e["source"] == "history")
    # The history overflowed the window several times over, yet the cut moved only a few
    # times: at most once per half window of history.
    moves = [n for n in range(1, len(starts)) if starts[n] != starts[n - 1]]
    assert 2 <= len(moves) <= history_tokens // (USABLE // 2)
    for n in moves:
        assert reused[n] < reused[n - 1]
    # Between two moves every call reuses all of the previous call's history.
    steady = [n for n in range(1, len(starts)) if n not in moves and starts[n] != "history:0"]
    assert steady
    assert all(reused[n] >= reused[n - 1] for n in steady)


def test_a_world_state_update_leaves_the_bytes_before_it_in_place(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    state = {"rules": "Run the tests before committing.", "environment": {"branch": "main"}}
    put = client.put(f"/sessions/{session_id}/world-state", json={"sections": state})
    assert put.status_code == 200, put.text
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 300), *_turn(2, 300)])
    first = _assemble(client, session_id)

    moved = {**state, "environment": {"branch": "fix-export"}}
    put = client.put(f"/sessions/{session_id}/world-state", json={"sections": moved})
    assert put.status_code == 200, put.text
    second = _assemble(client, session_id)

    changed = next(
        n
        for n, (a, b) in enumerate(zip(first["messages"], second["messages"], strict=True))
        if a != b
    )
    # The goal, the rules and the whole history come before the updated section: unchanged.
    assert [i["id"] for i in second["items"][:changed]] == [
        "goal",
        "world_state:rules",
        *(f"history:{n}" for n in range(5)),
    ]
    assert "fix-export" in visible_text(second["messages"][changed])
    assert second["cache"]["reused_prefix_tokens"] == sum(
        i["tokens"] for i in second["items"][:changed]
    )


def test_when_whole_calls_do_not_fit_the_task_and_the_newest_calls_show_cut(
    client: TestClient, session_id: str
) -> None:
    """Issue 43: a window of 8,000 (4,000 usable), a 4-token task, three calls whose outputs
    are 4,199 tokens each, then a short assistant message: the context was 79 tokens (the goal,
    a notice, the assistant message and the goal again), the task and every output dropped."""
    created = client.post("/sessions", json={"session_id": session_id, "context_window": 8_000})
    assert created.json()["usable_window"] == 4_000
    task = user_msg("Fix the export.")
    items: list[dict[str, Any]] = [task]
    for number in range(1, 4):
        items += _turn(number, 4_199)
    items.append({"type": "message", "role": "assistant", "content": "Three runs, one error."})
    _append(client, session_id, items)
    body = _assemble(client, session_id)
    shown = body["messages"]
    texts = [visible_text(item) for item in shown]
    assert task in shown
    calls = [item for item in shown if item["type"] == "function_call"]
    outputs = [item for item in shown if item["type"] == "function_call_output"]
    assert [call["call_id"] for call in calls] == ["call-1", "call-2", "call-3"]
    assert [output["call_id"] for output in outputs] == ["call-1", "call-2", "call-3"]
    for output, seq in zip(outputs, (3, 5, 7), strict=True):
        whole = items[seq - 1]["output"]
        head, rest = output["output"].split("[…", 1)
        assert whole.startswith(head)
        assert rest.endswith(whole[-20:])
        assert f"the whole output is fact seq {seq} …]" in rest
    assert "Three runs, one error." in "\n".join(texts)
    # The window is used, not left nine tenths empty.
    assert 3_000 <= body["total_tokens"] <= 4_000


def test_a_stable_cut_never_drops_the_latest_user_message_the_window_holds(
    client: TestClient, session_id: str
) -> None:
    """Issue 43: the history was cut at a stable point past the user's request although the
    request would fit. The cut now stops at the latest user message, which stays put while its
    turn goes on."""
    _session(client, session_id)
    _append(client, session_id, [user_msg("Fix the export.")])
    for number in range(1, 25):
        _append(client, session_id, _turn(number, 500))
    request = user_msg("Now make the import UTF-8 too.")
    _append(client, session_id, [request])
    after_request = 0
    for number in range(25, 40):
        turn = _turn(number, 500)
        _append(client, session_id, turn)
        after_request += sum(count(visible_text(item)) for item in turn)
        body = _assemble(client, session_id)
        # The request, what came after it, the goal and a notice fit: the request is shown.
        if after_request + 200 <= USABLE:
            assert request in body["messages"], number
        assert body["total_tokens"] <= USABLE
    assert request not in body["messages"]  # until it no longer fits
