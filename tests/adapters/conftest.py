"""What every adapter test shares: one real contextd process with an API key, and a real
trajectory cut into the turns a scripted model replays.

A `Script` is the model's side of a recorded run: each turn is what the assistant said and the
calls it made, in Responses form; the tools answer each call with the output the run recorded.
Driving a framework's agent loop with it replays the run through the framework, so the tests can
hold what the model received each turn against what contextd assembled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from contextd_client import ContextdClient
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
    assembly (`contextd_cache_predicted_tokens_total`, `contextd_cache_actual_tokens_total`)."""
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.labels.get("unit") != unit or not sample.name.endswith("_total"):
                continue
            if sample.name == "contextd_provider_tokens_total":
                counters[sample.labels["kind"]] = sample.value
            elif sample.name.startswith("contextd_cache_"):
                counters[sample.name] = sample.value
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
