"""What every adapter test shares: one real contextd process with an API key, and a real
trajectory cut into the turns a scripted model replays.

A `Script` is the model's side of a recorded run: each turn is what the assistant said and the
calls it made, in Responses form; the tools answer each call with the output the run recorded.
Driving a framework's agent loop with it replays the run through the framework, so the tests can
hold what the model received each turn against what contextd assembled.

`clear_an_earlier_run` gives a session an earlier run whose long test output compaction
cleared, for the recall tests: the model finds the output's seq in the placeholder it is shown,
searches it with a pattern the service refuses, reads it back, and answers with what it read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from contextd_client import ContextdClient, ValidationFailed
from contextd_client.items import Item
from tests.conftest import load_trajectory
from tests.e2e.servers import Server, running

API_KEY = "ctx-adapter-tests-key"
TRAJECTORIES = Path(__file__).parents[1] / "data" / "trajectories"
TRAJECTORY = TRAJECTORIES / "swea_fncall_marshmallow-1867.jsonl"
GOAL = "Make marshmallow's TimeDelta serialize 345 milliseconds as 345, not 344."
GOAL_TEXT = f'<goal version="1">\n{GOAL}\n</goal>'
"""The goal as session-mode assembly pins it (first, and restated last)."""
# A window the trajectory outgrows part-way through, so the advice fires during the run.
SMALL_WINDOW = 12_000


@pytest.fixture(scope="session")
def server(postgres_url: str) -> Iterator[Server]:
    with running(postgres_url, CTX_API_KEYS=f'["adapter-tests:{API_KEY}"]') as service:
        yield service


def logged_as_sent(
    client: ContextdClient, session_id: str, *, unknown_prefix: str
) -> list[dict[str, Any]]:
    """The raw log as the adapter sent it: each chat message once (as the service keeps its
    original), and the items of unknown type whose type starts with `unknown_prefix`."""
    logged: list[dict[str, Any]] = []
    for each in client.iter_items(session_id):
        if each.original is not None and "message" in each.original:
            logged.append(each.original["message"])
        elif each.type.startswith(unknown_prefix):
            logged.append(each.item)
    return logged


def usage_counters(metrics: str, *, unit: str) -> dict[str, float]:
    """From the service's `/metrics` text, `unit`'s usage counters: provider tokens by kind
    (`cached`, `uncached`, `output`), and the cache counters of usage reported against an
    assembly (`contextd_cache_predicted_tokens_total`, `contextd_cache_actual_tokens_total`, the
    outcomes and misses over their classes)."""
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.labels.get("unit") != unit or not sample.name.endswith("_total"):
                continue
            if sample.name == "contextd_provider_tokens_total":
                counters[sample.labels["kind"]] = sample.value
            elif sample.name.startswith("contextd_cache_"):
                # Summed over the other labels (the outcome counters' class).
                counters[sample.name] = counters.get(sample.name, 0.0) + sample.value
    return counters


@dataclass(frozen=True)
class Turn:
    """One model answer: its text (may be empty) and its calls, as Responses items."""

    text: str
    calls: tuple[dict[str, Any], ...]


@dataclass
class Script:
    """The recorded run: the opening user message, the model's turns, the tools' outputs."""

    instructions: str
    prompt: str
    turns: list[Turn]
    outputs: dict[str, str]
    tool_names: list[str] = field(default_factory=list)

    def output_for(self, call_id: str) -> str:
        return self.outputs[call_id]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def load_script(path: Path = TRAJECTORY, *, turns: int | None = None) -> Script:
    """The run at `path` as a script; `turns` keeps only the first ones (the last turn then
    answers in text, so the loop ends)."""
    items = load_trajectory(path)
    instructions = _text(items[0])
    prompt = _text(items[1])
    script_turns: list[Turn] = []
    outputs: dict[str, str] = {}
    text = ""
    calls: list[dict[str, Any]] = []
    for item in items[2:]:
        kind = item.get("type")
        if kind == "message" and item.get("role") == "assistant":
            if calls:
                script_turns.append(Turn(text, tuple(calls)))
                calls = []
            text = _text(item)
        elif kind == "function_call":
            calls.append(item)
        elif kind == "function_call_output":
            output = item["output"]
            outputs[item["call_id"]] = output if isinstance(output, str) else json.dumps(output)
    if calls:
        script_turns.append(Turn(text, tuple(calls)))
    if turns is not None:
        script_turns = script_turns[:turns]
    script_turns.append(Turn("Done: the fix is in and the tests pass.", ()))
    names = sorted({call["name"] for turn in script_turns for call in turn.calls})
    return Script(instructions, prompt, script_turns, outputs, names)


def responses_pairing_holds(items: list[dict[str, Any]]) -> bool:
    """Every function call has exactly one output after it, and every output a call before it."""
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            open_calls[item["call_id"]] = 0
        elif kind == "function_call_output":
            call_id = item["call_id"]
            if call_id not in open_calls or call_id in answered:
                return False
            answered.add(call_id)
    return set(open_calls) == answered


def chat_pairing_holds(messages: list[dict[str, Any]]) -> bool:
    """Every assistant tool call is answered by a tool message right after it, and every tool
    message answers a call of the assistant message before it."""
    waiting: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                return False
            waiting.discard(message["tool_call_id"])
            continue
        if waiting:
            return False
        if role == "assistant":
            waiting = {call["id"] for call in message.get("tool_calls") or []}
    return not waiting


EARLIER_OUTPUT = (
    "".join(f"tests/test_fields.py::test_timedelta_case_{n} PASSED\n" for n in range(60))
    + "tests/test_fields.py::test_timedelta_rounds_milliseconds FAILED\n"
    + "E   assert 344 == 345\n"
    + "1 failed, 60 passed"
)
EARLIER_RUN: list[Item] = [
    {"type": "message", "role": "user", "content": "Run the field tests."},
    {
        "type": "function_call",
        "call_id": "earlier-1",
        "name": "run_tests",
        "arguments": '{"path": "tests/test_fields.py"}',
    },
    {"type": "function_call_output", "call_id": "earlier-1", "output": EARLIER_OUTPUT},
    {"type": "message", "role": "assistant", "content": "One test fails; the others pass."},
]
RECALL_PROMPT = "Which test failed in the earlier run, and how?"
BAD_PATTERN = "FAILED ("
"""A pattern RE2 refuses (422): the model's mistake, answered as the tool's output."""
SEARCH_TEXT = "The earlier output was cleared from my context; searching it for the failure."
READ_TEXT = "That pattern was refused; reading the whole output instead."
_PLACEHOLDER_SEQ = re.compile(r"the full output is fact seq (\d+)")


@dataclass(frozen=True)
class ClearedRun:
    """An earlier run in the session whose long output compaction cleared, and the service's
    own answers to the model's recalls of it."""

    output_seq: int
    recalled: str
    """The service's `tool_output` for `{"seq": output_seq}`."""
    refused: str
    """The service's message refusing `{"seq": output_seq, "pattern": BAD_PATTERN}`."""


def clear_an_earlier_run(client: ContextdClient, session_id: str) -> ClearedRun:
    """Appends `EARLIER_RUN` to the (existing) session and clears its output by compaction."""
    appended = client.append_items(session_id, items=EARLIER_RUN)
    compaction = client.compact(
        session_id=session_id, strategy="clear_tool_results", params={"keep_recent": 0}
    )
    assert compaction.applied, compaction.not_applied_because
    output_seq = appended.first_seq + 2
    with pytest.raises(ValidationFailed) as refused:
        client.recall(session_id, seq=output_seq, pattern=BAD_PATTERN)
    recalled = client.recall(session_id, seq=output_seq).tool_output
    return ClearedRun(output_seq, recalled, refused.value.message)


def cleared_seq(received: str) -> int:
    """The seq of the one cleared output in what the model received, as its placeholder names
    it ("the full output is fact seq 7")."""
    (seq,) = _PLACEHOLDER_SEQ.findall(received)
    return int(seq)


def failure_answer(recalled: str) -> str:
    """The model's final answer, built from what the recall gave it back."""
    failed = re.search(r"^(\S+) FAILED\n(E .*)$", recalled, flags=re.MULTILINE)
    assert failed is not None, recalled
    return f"{failed.group(1)} failed: {failed.group(2).removeprefix('E').strip()}."
