"""The Pydantic AI adapter against a real contextd process: the real `pydantic_ai.Agent` drives
its own loop with a `FunctionModel` replaying a recorded run, and every model call must receive
exactly the context contextd assembled for it.

The scripted model answers with the script's turns (text and tool calls) and reports usage the
way a provider would: the assembled tokens plus a fixed overhead as input, the predicted reused
prefix as cached. Tools named after the script's answer each call with the recorded output.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from contextd_client import ContextdClient, models
from contextd_client.pydantic_ai import ContextdHistory
from contextd_client.recall import RECALL_TOOL_NAME
from contextd_client.runtime import LinkOptions
from tests.adapters.conftest import (
    API_KEY,
    BAD_PATTERN,
    GOAL,
    GOAL_TEXT,
    READ_TEXT,
    RECALL_PROMPT,
    SEARCH_TEXT,
    SMALL_WINDOW,
    Script,
    Turn,
    chat_pairing_holds,
    clear_an_earlier_run,
    cleared_seq,
    failure_answer,
    load_script,
    logged_as_sent,
    usage_counters,
)
from tests.e2e.servers import Server

ROOT = Path(__file__).resolve().parents[2]
# Provider tokens beyond the assembled context (tool schemas, message framing): the scripted
# provider reports the assembled tokens plus this, so calibration must find exactly it.
OVERHEAD = 300
# OpenAI models take a system prompt where it stands; without this, Pydantic AI would wrap the
# restated goal in a user message before the model sees it.
PROFILE = ModelProfile(supports_inline_system_prompts=True)
ANY_ARGUMENTS = {"type": "object", "additionalProperties": True}
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@dataclass(frozen=True)
class Call:
    """One model call: what the model received, and the assembly the adapter had just made."""

    messages: list[ModelMessage]
    assembly_id: str


@dataclass
class ScriptedModel:
    """Answers with the script's turns in order, keeping every call it received."""

    script: Script
    history: ContextdHistory
    calls: list[Call] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assembly = self.history.link.last_assembly
        assert assembly is not None
        turn = self.script.turns[len(self.calls)]
        self.calls.append(Call(list(messages), assembly.assembly_id))
        parts: list[ModelResponsePart] = [TextPart(turn.text)] if turn.text else []
        parts += [
            ToolCallPart(call["name"], call["arguments"], tool_call_id=call["call_id"])
            for call in turn.calls
        ]
        usage = RequestUsage(
            input_tokens=assembly.total_tokens + OVERHEAD,
            cache_read_tokens=assembly.cache.reused_prefix_tokens,
            output_tokens=output_tokens(turn),
        )
        return ModelResponse(parts=parts, usage=usage)


def output_tokens(turn: Turn) -> int:
    return 20 + len(turn.text) // 4 + 10 * len(turn.calls)


def recorded_tools(script: Script) -> list[Tool[Any]]:
    def answer(ctx: RunContext[Any], **_: Any) -> str:
        assert ctx.tool_call_id is not None
        return script.output_for(ctx.tool_call_id)

    return [
        Tool.from_schema(answer, name, f"The recorded `{name}`.", ANY_ARGUMENTS, takes_ctx=True)
        for name in script.tool_names
    ]


@dataclass(frozen=True)
class Replay:
    """What a replayed run left: the conversation's messages, those the run added, each model
    call, the adapter."""

    messages: list[ModelMessage]
    new_messages: list[ModelMessage]
    calls: list[Call]
    history: ContextdHistory


async def replay(
    server: Server,
    session_id: str,
    script: Script,
    *,
    message_history: Sequence[ModelMessage] = (),
    options: LinkOptions = LinkOptions(),  # noqa: B008 - frozen
) -> Replay:
    """Runs the script through a new `Agent` and a new `ContextdHistory`, as a new process
    would."""
    async with ContextdHistory(
        session_id, base_url=server.base, api_key=API_KEY, options=options
    ) as history:
        model = ScriptedModel(script, history)
        agent = Agent(
            FunctionModel(model, profile=PROFILE),
            system_prompt=script.instructions,
            tools=recorded_tools(script),
            capabilities=[history],
        )
        result = await agent.run(script.prompt, message_history=list(message_history))
    return Replay(result.all_messages(), result.new_messages(), model.calls, history)


def sent(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """What a model received, as chat messages: one per request part, one per response."""
    chat: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            calls = [
                {"id": part.tool_call_id, "name": part.tool_name, "arguments": part.args}
                for part in message.parts
                if isinstance(part, ToolCallPart)
            ]
            text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
            chat.append({"role": "assistant", "content": text, "tool_calls": calls})
            continue
        for part in message.parts:
            match part:
                case SystemPromptPart():
                    chat.append({"role": "system", "content": part.content})
                case UserPromptPart():
                    chat.append({"role": "user", "content": part.content})
                case ToolReturnPart():
                    chat.append(
                        {
                            "role": "tool",
                            "tool_call_id": part.tool_call_id,
                            "name": part.tool_name,
                            "content": part.content,
                        }
                    )
                case _:
                    chat.append({"role": part.part_kind})
    return chat


def assembled(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assembly's chat messages in the shape of `sent`: developer messages are system ones,
    text parts are joined (but a user's), a tool message carries the name of the call it
    answers."""

    def text(content: str | list[dict[str, Any]] | None) -> str:
        return content if isinstance(content, str) else "".join(p["text"] for p in content or [])

    names: dict[str, str] = {}
    chat: list[dict[str, Any]] = []
    for message in messages:
        match message["role"]:
            case "assistant":
                calls = [
                    {"id": call["id"], **call["function"]} for call in message.get("tool_calls", [])
                ]
                names.update((call["id"], call["name"]) for call in calls)
                chat.append(
                    {"role": "assistant", "content": text(message["content"]), "tool_calls": calls}
                )
            case "tool":
                call_id = message["tool_call_id"]
                content = text(message["content"])
                chat.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": names[call_id],
                        "content": content,
                    }
                )
            case "user":  # a prompt of parts stays a list of them
                content = message["content"]
                prompt = content if isinstance(content, str) else [p["text"] for p in content]
                chat.append({"role": "user", "content": prompt})
            case _:
                chat.append({"role": "system", "content": text(message["content"])})
    return chat


def assert_each_call_got_its_assembly(
    client: ContextdClient, run: Replay, *, instructions: str
) -> None:
    """Each call's whole input is its assembly translated, after the agent's system prompt;
    the goal is pinned first (restated last once the history is long); pairing holds; not the
    run's list."""
    requests = [m for m in run.new_messages if isinstance(m, ModelRequest)]
    assert len(run.calls) == len(requests)
    for number, call in enumerate(run.calls):
        stored = client.get_assembly(call.assembly_id).response
        received = sent(call.messages)
        assert received == [
            {"role": "system", "content": instructions},
            *assembled(stored.messages),
        ]
        assert received[1] == {"role": "system", "content": GOAL_TEXT}
        if any(item.id == "goal#restated" for item in stored.items):  # once the history is long
            assert received[-1] == {"role": "system", "content": GOAL_TEXT}
        assert chat_pairing_holds(stored.messages)
        assert chat_pairing_holds(received)
        raw = run.messages[: run.messages.index(requests[number]) + 1]
        assert received != sent(raw)


def logged_messages(client: ContextdClient, session_id: str) -> list[dict[str, Any]]:
    return logged_as_sent(client, session_id, unknown_prefix="pydantic_ai:")


def script_messages(script: Script) -> list[dict[str, Any]]:
    """The recorded run as the chat messages the adapter must log: the task, each turn's
    assistant message with its calls and their outputs, the final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": script.prompt}]
    for turn in script.turns:
        calls = [
            {
                "id": call["call_id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(
                        json.loads(call["arguments"]), separators=(",", ":"), ensure_ascii=False
                    ),
                },
            }
            for call in turn.calls
        ]
        assistant = {"role": "assistant", "content": turn.text or None}
        messages.append({**assistant, "tool_calls": calls} if calls else assistant)
        messages += [
            {"role": "tool", "tool_call_id": call["id"], "content": script.output_for(call["id"])}
            for call in calls
        ]
    return messages


def start_session(client: ContextdClient, session_id: str, *, window: int = 200_000) -> None:
    client.create_session(session_id=session_id, context_window=window)
    client.put_goal(session_id, text=GOAL)


@pytest.fixture
def client(server: Server) -> Iterator[ContextdClient]:
    with ContextdClient(server.base, api_key=API_KEY) as contextd:
        yield contextd


def test_each_model_call_receives_its_assembled_context_and_every_message_is_logged_once(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    script = load_script()
    start_session(client, session_id)

    run = asyncio.run(replay(server, session_id, script))

    assert_each_call_got_its_assembly(client, run, instructions=script.instructions)
    # The system prompt travels beside the assembly, as Pydantic AI sends it: not logged.
    assert logged_messages(client, session_id) == script_messages(script)
    assert run.history.link.excluded == []


def test_each_calls_usage_is_reported_against_the_assembly_it_was_sent(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    script = load_script()
    start_session(client, session_id)
    unit = "pydantic-ai-usage"
    before = usage_counters(client.metrics(), unit=unit)

    run = asyncio.run(replay(server, session_id, script, options=LinkOptions(unit=unit)))

    stored = [client.get_assembly(call.assembly_id).response for call in run.calls]
    after = usage_counters(client.metrics(), unit=unit)
    cached = sum(assembly.cache.reused_prefix_tokens for assembly in stored)
    inputs = sum(assembly.total_tokens + OVERHEAD for assembly in stored)
    reported = {
        "cached": cached,
        "uncached": inputs - cached,
        "output": sum(map(output_tokens, script.turns)),
        "contextd_cache_actual_tokens_total": cached,
        "contextd_cache_predicted_tokens_total": cached,
        # Every report classified, each as predicted: no miss counted.
        "contextd_cache_outcomes_total": len(run.calls),
    }
    assert {kind: after[kind] - before.get(kind, 0.0) for kind in after} == reported
    # Each call's input tokens were its own assembly's tokens plus the overhead: the session's
    # calibration found exactly that, from one report per assembly.
    assert client.get_session(session_id).tokenizer == models.TokenizerBody(
        family="other",
        ratio=1.0,
        overhead_tokens=OVERHEAD,
        calibrated=True,
        samples=len(run.calls),
        exact=False,
    )


def test_small_window_run_compacts_when_advised_and_the_model_gets_the_compacted_context(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    script = load_script()
    start_session(client, session_id, window=SMALL_WINDOW)

    run = asyncio.run(replay(server, session_id, script))

    # A compaction that would free too little writes nothing; some must have applied.
    applied = [compaction for compaction in run.history.link.compactions if compaction.applied]
    assert applied
    assert client.get_session(session_id).compactions == len(applied)
    assert_each_call_got_its_assembly(client, run, instructions=script.instructions)
    # The last call got far less than the run holds; the log still holds all of it.
    assert len(sent(run.calls[-1].messages)) < len(sent(run.messages))
    assert logged_messages(client, session_id) == script_messages(script)


def test_a_continued_conversation_appends_only_its_new_messages(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    first_turns = load_script(turns=3)
    start_session(client, session_id)
    first = asyncio.run(replay(server, session_id, first_turns))
    logged_after_first = logged_messages(client, session_id)
    follow_up = Script(
        first_turns.instructions,
        "Now also check negative durations.",
        [Turn("Negative durations round the same way: nothing else to change.", ())],
        first_turns.outputs,
        first_turns.tool_names,
    )

    second = asyncio.run(replay(server, session_id, follow_up, message_history=first.messages))

    # The first run's final answer was logged when it ended; the second run, with a new
    # adapter, wrote only its prompt and its answer.
    assert logged_after_first == script_messages(first_turns)
    assert logged_messages(client, session_id) == [
        *logged_after_first,
        {"role": "user", "content": follow_up.prompt},
        {"role": "assistant", "content": follow_up.turns[0].text},
    ]
    assert_each_call_got_its_assembly(client, second, instructions=first_turns.instructions)


def test_parts_without_a_chat_form_are_kept_in_the_log_and_excluded_without_an_exception(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    """Files and thinking have no chat form: each is logged as a `pydantic_ai:` item and
    reported excluded. With no goal set, the first request (a picture) has nothing the
    assembly shows, so the framework's own request is what the model gets."""
    picture = BinaryContent(data=PNG, media_type="image/png")
    thinking = ThinkingPart("The picture is small; zooming in will help.", signature="sig-1")
    answers = [
        ModelResponse(
            parts=[
                thinking,
                TextPart("Let me zoom in."),
                ToolCallPart("zoom", {"factor": 2}, tool_call_id="call_zoom"),
            ]
        ),
        ModelResponse(parts=[TextPart("A red square.")]),
    ]
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return answers[len(received) - 1]

    def zoom(factor: int) -> list[Any]:
        return [f"Zoomed in {factor}x.", picture]

    async def run() -> tuple[list[ModelMessage], ContextdHistory]:
        async with ContextdHistory(session_id, base_url=server.base, api_key=API_KEY) as history:
            agent = Agent(
                FunctionModel(model, profile=PROFILE),
                system_prompt="Describe what you are shown.",
                tools=[Tool(zoom)],
                capabilities=[history],
            )
            result = await agent.run(["What is in this picture?", picture])
        return result.all_messages(), history

    messages, history = asyncio.run(run())

    tool_return = next(
        part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)
    )
    kept = [
        {
            "type": f"pydantic_ai:{part.part_kind}",
            "part": pydantic_core.to_jsonable_python(part, bytes_mode="base64"),
        }
        for part in (messages[0].parts[1], thinking, tool_return)
    ]
    zoom_call = {
        "id": "call_zoom",
        "type": "function",
        "function": {"name": "zoom", "arguments": '{"factor":2}'},
    }
    assert logged_messages(client, session_id) == [
        kept[0],
        kept[1],
        {"role": "assistant", "content": "Let me zoom in.", "tool_calls": [zoom_call]},
        {"role": "tool", "tool_call_id": "call_zoom", "content": "Zoomed in 2x."},
        kept[2],
        {"role": "assistant", "content": "A red square."},
    ]
    assert [(each.type, each.reason) for each in history.link.excluded] == [
        ("pydantic_ai:user-prompt", "unknown_type"),
        ("pydantic_ai:thinking", "unknown_type"),
        ("pydantic_ai:tool-return", "unknown_type"),
    ]
    assert sent(received[0]) == [
        {"role": "system", "content": "Describe what you are shown."},
        {"role": "user", "content": ["What is in this picture?", picture]},
    ]
    assert sent(received[1]) == [
        {"role": "system", "content": "Describe what you are shown."},
        {
            "role": "assistant",
            "content": "Let me zoom in.",
            "tool_calls": [{"id": "call_zoom", "name": "zoom", "arguments": '{"factor":2}'}],
        },
        {"role": "tool", "tool_call_id": "call_zoom", "name": "zoom", "content": "Zoomed in 2x."},
    ]


# A history built by hand may still hold the deprecated `RetryPromptPart`, which the adapter
# must translate like its replacements: building one is the only way to show it does.
@pytest.mark.filterwarnings(
    "ignore:`RetryPromptPart` is deprecated:pydantic_ai.PydanticAIDeprecationWarning"
)
def test_retries_a_later_system_prompt_and_a_prompt_of_parts_are_logged_in_their_chat_roles(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    earlier: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("What is two plus two?")]),
        ModelResponse(parts=[TextPart("4")]),
        ModelRequest(parts=[RetryPromptPart("Answer with a word.")]),
        ModelResponse(parts=[TextPart("four")]),
        ModelRequest(parts=[SystemPromptPart("Answer tersely."), UserPromptPart("Ready?")]),
        ModelResponse(parts=[TextPart("Yes.")]),
    ]
    answers = [
        ModelResponse(parts=[ToolCallPart("lookup", {"key": "b"}, tool_call_id="call_b")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"key": "a"}, tool_call_id="call_a")]),
        ModelResponse(parts=[TextPart("It holds a.")]),
        ModelResponse(parts=[TextPart("done")]),
    ]
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return answers[len(received) - 1]

    def lookup(key: str) -> str:
        if key != "a":
            raise ModelRetry("No such key; the store holds 'a'.")
        return "a: 1"

    def must_say_done(output: str) -> str:
        if output != "done":
            raise ModelRetry("Say 'done' when you are done.")
        return output

    async def run() -> tuple[list[ModelMessage], ContextdHistory]:
        async with ContextdHistory(session_id, base_url=server.base, api_key=API_KEY) as history:
            agent = Agent(
                FunctionModel(model, profile=PROFILE),
                tools=[Tool(lookup)],
                capabilities=[history],
            )
            agent.output_validator(must_say_done)
            result = await agent.run(["Look up", "key b."], message_history=earlier)
        return result.all_messages(), history

    messages, history = asyncio.run(run())

    parts = [part for message in messages for part in message.parts]
    retried = next(p for p in parts if isinstance(p, ToolReturnPart) and p.outcome == "retried")
    feedback = next(p for p in parts if isinstance(p, RetryFeedbackPart))
    legacy = next(p for p in parts if isinstance(p, RetryPromptPart))

    def call(call_id: str, key: str) -> dict[str, Any]:
        function = {"name": "lookup", "arguments": f'{{"key":"{key}"}}'}
        return {"id": call_id, "type": "function", "function": function}

    assert logged_messages(client, session_id) == [
        {"role": "user", "content": "What is two plus two?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": legacy.model_response()},
        {"role": "assistant", "content": "four"},
        {"role": "developer", "content": "Answer tersely."},
        {"role": "user", "content": "Ready?"},
        {"role": "assistant", "content": "Yes."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Look up"}, {"type": "text", "text": "key b."}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call("call_b", "b")]},
        {"role": "tool", "tool_call_id": "call_b", "content": retried.model_response_str()},
        {"role": "assistant", "content": None, "tool_calls": [call("call_a", "a")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "a: 1"},
        {"role": "assistant", "content": "It holds a."},
        {"role": "user", "content": feedback.model_response()},
        {"role": "assistant", "content": "done"},
    ]
    assert history.link.excluded == []
    # The last call got the later system prompt where it stands, and the feedback as a prompt.
    assert sent(received[-1])[4:6] == [
        {"role": "system", "content": "Answer tersely."},
        {"role": "user", "content": "Ready?"},
    ]
    assert sent(received[-1])[-1] == {"role": "user", "content": feedback.model_response()}


def test_images_the_session_holds_reach_the_model_as_pydantic_ai_files(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    data_url = "data:image/png;base64,iVBORw0KGgo="
    client.create_session(session_id=session_id)
    client.append_items(
        session_id,
        items=[
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Two pictures:"},
                    {"type": "input_image", "image_url": data_url, "detail": "auto"},
                    {
                        "type": "input_image",
                        "image_url": "https://example.com/b.png",
                        "detail": "auto",
                    },
                ],
            },
            {"type": "message", "role": "assistant", "content": "I see them."},
        ],
    )
    received: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return ModelResponse(parts=[TextPart("Both are squares.")])

    async def run() -> None:
        async with ContextdHistory(session_id, base_url=server.base, api_key=API_KEY) as history:
            agent = Agent(FunctionModel(model, profile=PROFILE), capabilities=[history])
            await agent.run("What shapes are they?")

    asyncio.run(run())

    pictures = [
        "Two pictures:",
        BinaryImage(data=b"\x89PNG\r\n\x1a\n", media_type="image/png"),
        ImageUrl(url="https://example.com/b.png"),
    ]
    assert sent(received[0]) == [
        {"role": "user", "content": pictures},
        {"role": "assistant", "content": "I see them.", "tool_calls": []},
        {"role": "user", "content": "What shapes are they?"},
    ]


def test_the_model_recalls_an_output_compaction_cleared_and_a_refused_recall_is_its_answer(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    start_session(client, session_id)
    cleared = clear_an_earlier_run(client, session_id)
    received: list[list[ModelMessage]] = []
    offered: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        offered[:] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters_json_schema,
                },
            }
            for tool in info.function_tools
        ]
        seen = json.dumps(sent(messages), default=str)
        recalled = [
            part.model_response_str()
            for message in messages
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_call_id.startswith("recall-")
        ]
        match recalled:
            case []:
                arguments = {"seq": cleared_seq(seen), "pattern": BAD_PATTERN}
                call = ToolCallPart(RECALL_TOOL_NAME, arguments, tool_call_id="recall-1")
                return ModelResponse(parts=[TextPart(SEARCH_TEXT), call])
            case [_refused]:
                arguments = {"seq": cleared_seq(seen)}
                call = ToolCallPart(RECALL_TOOL_NAME, arguments, tool_call_id="recall-2")
                return ModelResponse(parts=[TextPart(READ_TEXT), call])
            case _:
                return ModelResponse(parts=[TextPart(failure_answer(recalled[-1]))])

    async def run() -> str:
        async with ContextdHistory(session_id, base_url=server.base, api_key=API_KEY) as history:
            agent = Agent(FunctionModel(model, profile=PROFILE), capabilities=[history])
            result = await agent.run(RECALL_PROMPT)
        return result.output

    output = asyncio.run(run())

    # What the model was told each recall gave: the service's own text, never an error.
    returned = {
        part.tool_call_id: part.content
        for message in received[-1]
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }
    assert (returned["recall-1"], returned["recall-2"]) == (cleared.refused, cleared.recalled)
    assert output == failure_answer(cleared.recalled)

    # The calls and their outputs are in the log like any other tool's.
    def recall_call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        function = {
            "name": RECALL_TOOL_NAME,
            "arguments": json.dumps(arguments, separators=(",", ":")),
        }
        return {"id": call_id, "type": "function", "function": function}

    searched = {"seq": cleared.output_seq, "pattern": BAD_PATTERN}
    assert logged_messages(client, session_id) == [
        {"role": "user", "content": RECALL_PROMPT},
        {
            "role": "assistant",
            "content": SEARCH_TEXT,
            "tool_calls": [recall_call("recall-1", searched)],
        },
        {"role": "tool", "tool_call_id": "recall-1", "content": cleared.refused},
        {
            "role": "assistant",
            "content": READ_TEXT,
            "tool_calls": [recall_call("recall-2", {"seq": cleared.output_seq})],
        },
        {"role": "tool", "tool_call_id": "recall-2", "content": cleared.recalled},
        {"role": "assistant", "content": output},
    ]
    # The model is offered the tool the service offers beside every assembly (in chat form).
    assert offered == client.assemble(session_id=session_id, output_format="chat").tools


def test_the_recall_tool_is_offered_unless_the_session_is_made_without_it(
    server: Server,
) -> None:
    async def toolsets() -> list[list[str] | None]:
        without = LinkOptions(session={"recall_tool": False})
        names: list[list[str] | None] = []
        for options in (LinkOptions(), without):
            async with ContextdHistory("any", base_url=server.base, options=options) as history:
                toolset = history.get_toolset()
                names.append(None if toolset is None else list(toolset.tools))
        return names

    assert asyncio.run(toolsets()) == [[RECALL_TOOL_NAME], None]


def test_example_runs_offline_recalls_what_compaction_left_out_and_writes_its_session(
    server: Server, client: ContextdClient, session_id: str
) -> None:
    example = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_loop.py"), session_id],
        env={**os.environ, "CONTEXTD_URL": server.base, "CONTEXTD_API_KEY": API_KEY},
        capture_output=True,
        text=True,
        check=False,
    )

    assert example.returncode == 0, example.stderr
    logged = logged_messages(client, session_id)
    # The task, five tool turns, a recall, and the answer reporting what the recall read back.
    assert [message["role"] for message in logged] == [
        "user",
        *["assistant", "tool"] * 6,
        "assistant",
    ]
    assert client.get_session(session_id).compactions >= 1
    assert example.stdout.count("assembly ") == 7
    assert "recalled: test_to_milliseconds_rounds failed with assert 344 == 345" in example.stdout
    assert logged[-1] == {
        "role": "assistant",
        "content": "Fixed: to_milliseconds rounds instead of truncating, so"
        " test_to_milliseconds_rounds, which failed with `assert 344 == 345`, passes now;"
        " all 13 tests pass.",
    }
    # The recall searched a span holding the first test run's output, and its output is the
    # service's answer to that search.
    (searched,) = [
        call["function"]
        for message in logged
        for call in message.get("tool_calls", [])
        if call["function"]["name"] == RECALL_TOOL_NAME
    ]
    arguments = json.loads(searched["arguments"])
    (recalled,) = [m["content"] for m in logged if m.get("tool_call_id") == "call_6"]
    assert recalled == client.recall(session_id, **arguments).tool_output
    (first_run,) = [
        each.seq
        for each in client.iter_items(session_id)
        if each.type == "function_call_output" and each.item["call_id"] == "call_1"
    ]
    assert arguments["from_seq"] <= first_run <= arguments["to_seq"]
