"""Restorable context over HTTP on PostgreSQL: the recall tool every session-mode assembly offers
(the same bytes on every call, in each provider's own tool shape), what a context leaves out
listed in `elided` and named in the text the model reads, and the newest output kept in view
however small the window."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.items import FORMATS, Format, visible_text
from app.tokens import token_counter
from tests.builders import assistant_msg, system_msg, tool_call, tool_output, user_msg
from tests.providers import tool_violations

count = token_counter("o200k_base")


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


def _visible(answer: dict[str, Any]) -> str:
    return "\n".join(
        item["content"] if item["item"] is None else visible_text(item["item"])
        for item in answer["items"]
    )


def _named(answer: dict[str, Any]) -> list[int]:
    """The elided ranges whose first seq the context's text does not name."""
    text = _visible(answer)
    return [
        e["first_seq"]
        for e in answer["elided"]
        if not re.search(rf"\bfact seqs? {e['first_seq']}\b", text)
    ]


DATA = "\n".join(f"line {n}: value_{n} = {n * 13} ok" for n in range(330))


def test_the_newest_output_stays_in_view_in_a_small_window(
    client: TestClient, session_id: str
) -> None:
    # A 4,000-token window, 2,000 of it usable: the goal, a request, and one call whose output
    # alone is twice what is left.
    _session(client, session_id, context_window=4000)
    assert client.put(f"/sessions/{session_id}/goal", json={"text": "Find line 200."}).is_success
    call = tool_call("c1", arguments='{"cmd": "cat data.txt"}')
    _append(client, session_id, [user_msg("read the data file"), call, tool_output("c1", DATA)])
    answer = _assemble(client, session_id)
    history = [item for item in answer["items"] if item["source"] == "history"]
    assert [(item["item"]["type"], item["form"]) for item in history] == [
        ("message", "raw"),
        ("function_call", "raw"),
        ("function_call_output", "truncated"),
    ]
    assert history[1]["item"] == call
    shown = history[2]["item"]["output"]
    assert shown.startswith("line 0: value_0 = 0 ok\n")
    assert shown.endswith("line 329: value_329 = 4277 ok")
    assert "omitted; the whole output is fact seq 4 …]" in shown
    assert answer["total_tokens"] + answer["tools_tokens"] <= answer["budget"]["max_tokens"]
    assert not answer["over_budget"]
    assert answer["elided"] == [
        {
            "first_seq": 4,
            "last_seq": 4,
            "form": "truncated",
            "tokens_full": count(DATA),
            "tokens_shown": history[2]["tokens"],
            "reason": "max_tokens",
        }
    ]
    assert _named(answer) == []
    # The compaction the advice recommends acts: the output is cut to the target, and what the
    # model reads names where the rest is.
    advice = answer["advice"]
    assert advice["should_compact"]
    compacted = client.post(
        "/compact",
        json={"session_id": session_id, "strategy": advice["recommended_strategy"]},
    )
    assert compacted.status_code == 201, compacted.text
    body = compacted.json()
    assert body["tokens_after"] < body["tokens_before"]
    after = _assemble(client, session_id)
    assert not after["advice"]["should_compact"]
    assert [e["form"] for e in after["elided"]] == ["truncated"]
    assert _named(after) == []
    # And the whole output reads back from the log.
    recalled = client.post(
        f"/sessions/{session_id}/recall", json={"seq": 4, "max_lines": 1000, "max_tokens": 16000}
    )
    assert recalled.json()["text"] == DATA


def test_what_compactions_leave_out_is_listed_and_named(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, context_window=64_000)
    assert client.put(f"/sessions/{session_id}/goal", json={"text": "Fix the parser."}).is_success
    for turn in range(6):
        _append(
            client,
            session_id,
            [
                user_msg(f"step {turn}: look at module_{turn}.py"),
                tool_call(f"c{turn}", arguments=f'{{"cmd": "cat module_{turn}.py"}}'),
                tool_output(f"c{turn}", f"def handler_{turn}():\n" + "    pass\n" * 300),
                assistant_msg(f"module_{turn}.py has handler_{turn}"),
            ],
        )
    cleared = client.post(
        "/compact",
        json={
            "session_id": session_id,
            "strategy": "clear_tool_results",
            "params": {"keep_recent": 2},
        },
    )
    assert cleared.status_code == 201, cleared.text
    answer = _assemble(client, session_id)
    # The four oldest outputs (seqs 4, 8, 12, 16: the goal is seq 1) show as placeholders.
    assert [(e["first_seq"], e["last_seq"], e["form"]) for e in answer["elided"]] == [
        (seq, seq, "cleared") for seq in (4, 8, 12, 16)
    ]
    assert _named(answer) == []
    summary = client.post(
        "/compact",
        json={"session_id": session_id, "strategy": "summary", "params": {"target_tokens": 400}},
    )
    assert summary.status_code == 201, summary.text
    again = _assemble(client, session_id)
    assert again["elided"]
    # Over the target of 400, the newest turn's output is cut head and tail (`truncated`).
    assert {e["form"] for e in again["elided"]} == {"summarized", "cleared", "truncated"}
    assert _named(again) == []
    # The same log gives the same list.
    assert _assemble(client, session_id)["elided"] == again["elided"]


def test_what_normalization_leaves_out_mid_session_is_named_after_the_history(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id)
    _append(
        client,
        session_id,
        [
            user_msg("Fix the export."),
            tool_call("c1", arguments='{"cmd": "cat export.py"}'),
            tool_output("c1", "def export(rows): ..."),
        ],
    )
    first = _assemble(client, session_id)
    assert [item["id"] for item in first["items"] if item["source"] == "elision"] == []
    # A runtime mirrors its next run's system prompt into the session: normalization leaves it
    # out, and the context names it after the history, whose bytes stay as they were.
    _append(client, session_id, [system_msg("You are a careful engineer."), user_msg("Go on.")])
    second = _assemble(client, session_id)
    (left_out,) = second["elided"]
    assert (left_out["first_seq"], left_out["form"]) == (4, "excluded")
    notices = [item for item in second["items"] if item["source"] == "elision"]
    assert [(item["id"], item["layer"]) for item in notices] == [("elided#within", "task")]
    assert notices[0]["content"].startswith(
        "[contextd: not shown in this context: fact seq 4 (excluded, normalization: "
    )
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["cache"]["reused_prefix_tokens"] == first["total_tokens"]
