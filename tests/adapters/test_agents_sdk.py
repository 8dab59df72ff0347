"""The OpenAI Agents SDK adapter against a real contextd process: `agents.Runner` drives its own
loop with the SDK's own `ScriptedModel` (agents.testing) replaying a recorded run, tools answer
each call with the output the run recorded, and every model call must receive exactly the
context contextd assembled for it.

Runs go through both `Runner.run` and `Runner.run_streamed`: they write the run's input to the
session at different points (before the first model call, or only after the filter ran for
it), and the session must end up holding every item of the run exactly once either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import subprocess
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, Tool, Usage
from agents.items import TResponseInputItem, TResponseOutputItem
from agents.models.openai_responses import Converter
from agents.result import RunResultBase
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from openai.types.responses.response_usage import InputTokensDetails

from contextd_client import ContextdClient, models
from contextd_client.agents import ContextdSession, ContextdUsageHooks
from contextd_client.items import Item
from contextd_client.params import CreateSessionRequest
from contextd_client.recall import RECALL_TOOL_NAME
from contextd_client.runtime import LinkOptions
from tests.adapters.conftest import (
    API_KEY,
    BAD_PATTERN,
    EARLIER_RUN,
    GOAL,
    GOAL_TEXT,
    READ_TEXT,
    RECALL_PROMPT,
    SEARCH_TEXT,
    SMALL_WINDOW,
    Script,
    clear_an_earlier_run,
    cleared_seq,
    failure_answer,
    load_script,
    responses_pairing_holds,
    usage_counters,
)
from tests.e2e.servers import Server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agents_sdk_loop.py"
GOAL_MESSAGE = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": GOAL_TEXT}],
}
OVERHEAD = 300
"""Provider tokens the scripted model counts beyond the assembly (instructions, tool schemas)."""
SUMMARY_MARK = "[contextd:summary]"


def contextd_session(
    server: Server, session_id: str, *, unit: str | None = None, context_window: int | None = None
) -> ContextdSession:
    attributes: CreateSessionRequest = {"model": "gpt-4o"}
    if context_window is not None:
        attributes["context_window"] = context_window
    return ContextdSession(
        session_id,
        base_url=server.base,
        api_key=API_KEY,
        options=LinkOptions(unit=unit, session=attributes),
    )


async def set_goal(session: ContextdSession) -> None:
    await session.link.ensure_session()
    await session.client.put_goal(session.session_id, text=GOAL)


async def logged_items(session: ContextdSession) -> list[Item]:
    """The raw log's items, without the service's own facts (goal, compaction, retraction)."""
    return [
        logged.item
        async for logged in session.client.iter_items(session.session_id)
        if not logged.type.startswith("contextd.")
    ]


def items_of_run(prompt: str, result: RunResultBase) -> list[Item]:
    """What the run added, as the SDK itself turns it into input items: the prompt, then every
    item the run generated."""
    generated: list[Item] = [dict(item.to_input_item()) for item in result.new_items]
    return [{"type": "message", "role": "user", "content": prompt}, *generated]


@dataclass
class Replay:
    """A recorded run replayed through the SDK's loop. Each model call answers with the turn's
    text and calls and reports the assembled tokens plus `OVERHEAD` as the provider's input
    count (with the assembly's predicted prefix as cached); it notes the assembly it was given,
    how many compactions came before it, and the SDK's own list that the filter replaced."""

    session: ContextdSession
    script: Script
    tools_read_history: bool = False
    """Every tool call also reads `get_items`, as a tool showing the history would."""
    assembly_ids: list[str] = field(default_factory=list)
    compactions_before: list[int] = field(default_factory=list)
    sdk_inputs: list[list[TResponseInputItem]] = field(default_factory=list)
    usages: list[Usage] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model = ScriptedModel(
            [ModelStep.respond(self.answer(index)) for index in range(len(self.script.turns))]
        )

    def answer(self, index: int) -> Callable[[ModelCall], ModelStep]:
        def respond(call: ModelCall) -> ModelStep:
            assembly = self.session.link.last_assembly
            assert assembly is not None
            self.assembly_ids.append(assembly.assembly_id)
            self.compactions_before.append(len(self.session.link.compactions))
            turn = self.script.turns[index]
            output: list[TResponseOutputItem] = []
            if turn.text:
                output.append(assistant_message(turn.text, item_id=f"msg-{index}"))
            for each in turn.calls:
                output.append(
                    function_call(each["name"], each["arguments"], call_id=each["call_id"])
                )
            usage = Usage(
                requests=1,
                input_tokens=assembly.total_tokens + OVERHEAD,
                input_tokens_details=InputTokensDetails(
                    cached_tokens=assembly.cache.reused_prefix_tokens, cache_write_tokens=0
                ),
                output_tokens=len(turn.text) // 4 + 10,
            )
            usage.total_tokens = usage.input_tokens + usage.output_tokens
            self.usages.append(usage)
            return ModelStep(output=output, usage=usage)

        return respond

    def agent(self) -> Agent[Any]:
        async def recorded_output(context: ToolContext[Any], arguments: str) -> str:
            if self.tools_read_history:
                await self.session.get_items()
            return self.script.output_for(context.tool_call_id)

        tools: list[Tool] = [
            FunctionTool(
                name=name,
                description=f"The recorded run's {name} tool.",
                params_json_schema={"type": "object", "properties": {}},
                on_invoke_tool=recorded_output,
                strict_json_schema=False,
            )
            for name in self.script.tool_names
        ]
        return Agent(
            name="swe", instructions=self.script.instructions, model=self.model, tools=tools
        )

    def run_config(self) -> RunConfig:
        async def keeping_the_sdk_input(data: CallModelData[Any]) -> ModelInputData:
            self.sdk_inputs.append(list(data.model_data.input))
            return await self.session.call_model_input_filter(data)

        return RunConfig(call_model_input_filter=keeping_the_sdk_input, tracing_disabled=True)

    async def run(self, *, streamed: bool) -> RunResultBase:
        agent, prompt, turns = self.agent(), self.script.prompt, len(self.script.turns)
        options: dict[str, Any] = {
            "session": self.session,
            "run_config": self.run_config(),
            "hooks": ContextdUsageHooks(self.session),
            "max_turns": turns,
        }
        if not streamed:
            return await Runner.run(agent, prompt, **options)
        result = Runner.run_streamed(agent, prompt, **options)
        async for _ in result.stream_events():
            pass
        return result


async def stored_messages(session: ContextdSession, assembly_ids: list[str]) -> list[list[Item]]:
    return [
        (await session.client.get_assembly(assembly_id)).response.messages
        for assembly_id in assembly_ids
    ]


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_every_model_call_gets_its_assembly_and_the_session_holds_the_run_once(
    server: Server, session_id: str, streamed: bool
) -> None:
    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            script = load_script()
            replay = Replay(session, script)

            result = await replay.run(streamed=streamed)

            calls = replay.model.calls
            assert [call.input for call in calls] == await stored_messages(
                session, replay.assembly_ids
            )
            # The run's input reached the session before the first call, streamed or not.
            # The history is short: the goal is pinned first and not yet restated at the end.
            assert calls[0].input == [GOAL_MESSAGE, items_of_run(script.prompt, result)[0]]
            assert len(calls) == len(replay.sdk_inputs)
            for call in calls:
                assert call.system_instructions == script.instructions
                assert call.input[0] == GOAL_MESSAGE
                assert GOAL_MESSAGE not in call.input[1:-1]
                assert responses_pairing_holds(call.input)
            assert result.final_output == script.turns[-1].text
            assert await logged_items(session) == items_of_run(script.prompt, result)

    run(scenario)


def test_usage_is_reported_against_the_assembly_each_call_was_given(
    server: Server, session_id: str
) -> None:
    unit = "agents-sdk-usage"

    async def scenario() -> None:
        async with contextd_session(server, session_id, unit=unit) as session:
            await set_goal(session)
            replay = Replay(session, load_script(turns=4))
            before = usage_counters(await session.client.metrics(), unit=unit)

            await replay.run(streamed=False)

            after = usage_counters(await session.client.metrics(), unit=unit)
            cached = sum(usage.input_tokens_details.cached_tokens for usage in replay.usages)
            assert {kind: after[kind] - before.get(kind, 0.0) for kind in after} == {
                "cached": cached,
                "uncached": sum(usage.input_tokens for usage in replay.usages) - cached,
                "output": sum(usage.output_tokens for usage in replay.usages),
                "contextd_cache_actual_tokens_total": cached,
                "contextd_cache_predicted_tokens_total": cached,
                # Every report classified, each as predicted: no miss counted.
                "contextd_cache_outcomes_total": len(replay.usages),
            }
            # Each report named the assembly its call was given: every one calibrated the
            # session once, and the fitted overhead is exactly what the model added to it.
            tokenizer = (await session.client.context_window(session_id)).tokenizer
            assert tokenizer == models.TokenizerBody(
                family="openai",
                ratio=1.0,
                overhead_tokens=OVERHEAD,
                calibrated=True,
                samples=len(replay.model.calls),
                exact=True,
            )

    run(scenario)


def test_small_window_run_compacts_when_advised_and_the_model_gets_the_compacted_context(
    server: Server, session_id: str
) -> None:
    async def scenario() -> None:
        async with contextd_session(server, session_id, context_window=SMALL_WINDOW) as session:
            await set_goal(session)
            script = load_script()
            replay = Replay(session, script)

            result = await replay.run(streamed=False)

            compactions = session.link.compactions
            assert compactions
            assert [each.applied for each in compactions] == [True] * len(compactions)
            detail = await session.client.get_session(session_id)
            assert detail.compactions == len(compactions)
            calls = replay.model.calls
            assert [call.input for call in calls] == await stored_messages(
                session, replay.assembly_ids
            )
            compacted = [
                call.input
                for call, before, previous in zip(
                    calls, replay.compactions_before, [0, *replay.compactions_before], strict=False
                )
                if before > previous
            ]
            assert len(compacted) == len(compactions)
            for model_input in compacted:
                summary = model_input[1]
                assert (summary["role"], summary["content"][0]["text"][: len(SUMMARY_MARK)]) == (
                    "user",
                    SUMMARY_MARK,
                )
                assert model_input[0] == GOAL_MESSAGE
                assert responses_pairing_holds(model_input)
            # Compaction hid history from the model, never from the log.
            assert await logged_items(session) == items_of_run(script.prompt, result)

    run(scenario)


def test_reading_the_history_during_a_run_never_writes_the_run_again(
    server: Server, session_id: str
) -> None:
    async def scenario() -> None:
        async with contextd_session(server, session_id, context_window=SMALL_WINDOW) as session:
            await set_goal(session)
            script = load_script()
            # Each tool reads get_items mid-run, after compactions too: what it returns then is
            # no longer where the SDK's list starts.
            replay = Replay(session, script, tools_read_history=True)

            result = await replay.run(streamed=True)

            assert session.link.compactions
            assert await logged_items(session) == items_of_run(script.prompt, result)
            assert [call.input for call in replay.model.calls] == await stored_messages(
                session, replay.assembly_ids
            )

    run(scenario)


def test_a_message_said_again_in_a_later_run_is_written_again_before_the_model_is_called(
    server: Server, session_id: str
) -> None:
    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            model = ScriptedModel(
                [
                    [assistant_message("Which file?", item_id="a1")],
                    [assistant_message("Still: which file?", item_id="a2")],
                    [assistant_message("I need the file name.", item_id="a3")],
                ]
            )
            agent: Agent[Any] = Agent(name="helper", model=model)
            config = RunConfig(
                call_model_input_filter=session.call_model_input_filter, tracing_disabled=True
            )
            first = await Runner.run(agent, "continue", session=session, run_config=config)
            second = Runner.run_streamed(agent, "continue", session=session, run_config=config)
            async for _ in second.stream_events():
                pass
            third = Runner.run_streamed(agent, "continue", session=session, run_config=config)
            async for _ in third.stream_events():
                pass

            said = [
                item
                for result in (first, second, third)
                for item in items_of_run("continue", result)
            ]
            assert await logged_items(session) == said
            # The streamed runs wrote their "continue" only after the model call; the filter
            # had written it before, and the SDK's own write of it added nothing.
            assert model.calls[2].input == [GOAL_MESSAGE, *said[:-1]]

    run(scenario)


def test_get_items_limit_keeps_the_latest_whole_units_and_always_the_goal_and_world_state(
    server: Server, session_id: str
) -> None:
    history: list[Item] = [
        {"type": "message", "role": "user", "content": "why does the build fail?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "ls"}]},
        {"type": "function_call", "call_id": "a", "name": "bash", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": "a", "output": "setup.py src"},
        {"type": "message", "role": "assistant", "content": "Two calls at once now."},
        {"type": "function_call", "call_id": "b", "name": "bash", "arguments": '{"cmd":"make"}'},
        {"type": "function_call", "call_id": "c", "name": "bash", "arguments": '{"cmd":"env"}'},
        {"type": "function_call_output", "call_id": "b", "output": "error: no cc"},
        {"type": "function_call_output", "call_id": "c", "output": "PATH=/bin"},
        {"type": "message", "role": "user", "content": "install a compiler"},
    ]

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            await session.client.put_world_state(
                session_id, sections={"rules": "Never push to main.", "files": {"setup.py": "ok"}}
            )
            await session.add_items(cast(list[TResponseInputItem], history))

            everything = cast(list[Item], await session.get_items())
            assert [item for item in everything if item in history] == history
            # The goal and rules first, the changing world state after the history (a history
            # this short has no restated goal).
            leading, trailing = everything[:2], everything[-1:]
            assert leading[0] == GOAL_MESSAGE
            assert [item["role"] for item in leading + trailing] == ["developer"] * 3

            def kept(first: int) -> list[Item]:
                return [*leading, *history[first:], *trailing]

            # History may be cut before index 0, 1, 4, 5, 9 or 10 only: the reasoning, call a
            # and its output go together (1-3), and so do calls b and c with their outputs,
            # which interleave (5-8).
            assert [await session.get_items(limit) for limit in (0, 1, 4, 5, 6, 8, 9, 10)] == [
                kept(10),
                kept(9),
                kept(9),
                kept(5),
                kept(4),
                kept(4),
                kept(1),
                kept(0),
            ]
            assert await session.get_items(None) == everything

    run(scenario)


def test_get_items_limit_cuts_around_what_responses_cannot_carry(
    server: Server, session_id: str
) -> None:
    # Another provider's reasoning is kept in the log but has no Responses message: the cut
    # still counts and pairs the items the model is shown.
    anthropic_turn: list[Item] = [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "ls will do", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
        },
    ]

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            await session.client.append_items(session_id, items=anthropic_turn, format="anthropic")
            everything = cast(list[Item], await session.get_items())
            assert [item.get("type") for item in everything] == [
                "message",
                "message",
                "function_call",
                "function_call_output",
            ]
            assert await session.get_items(2) == [everything[0], *everything[2:]]
            assert await session.get_items(1) == [everything[0]]  # the pair is two items

    run(scenario)


def test_pop_item_hides_the_newest_item_with_its_pair_and_the_log_keeps_everything(
    server: Server, session_id: str
) -> None:
    question: TResponseInputItem = {"role": "user", "content": "list the files"}
    call: TResponseInputItem = {
        "type": "function_call",
        "call_id": "c1",
        "name": "bash",
        "arguments": '{"cmd":"ls"}',
    }
    output: TResponseInputItem = {"type": "function_call_output", "call_id": "c1", "output": "a"}
    answer: TResponseInputItem = {"role": "assistant", "content": "One file: a."}

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            await session.add_items([question, call, output])
            await session.add_items([answer])

            # The short-form messages are logged as Agents JS writes them, with their type.
            asked = {"type": "message", **question}
            answered = {"type": "message", **answer}
            assert await session.pop_item() == answered
            assert await session.get_items() == [GOAL_MESSAGE, asked, call, output]
            # Popping the output hides its call too: the history stays one a provider accepts.
            assert await session.pop_item() == output
            assert await session.get_items() == [GOAL_MESSAGE, asked]
            assert await session.pop_item() == asked
            assert await session.pop_item() is None
            assert await session.get_items() == [GOAL_MESSAGE]
            assert await logged_items(session) == [asked, call, output, answered]

    run(scenario)


def test_clear_session_empties_the_history_and_keeps_the_goal_and_the_log(
    server: Server, session_id: str
) -> None:
    before: list[TResponseInputItem] = [
        {"type": "message", "role": "user", "content": "list the files"},
        {"type": "message", "role": "assistant", "content": "a.py and b.py"},
    ]
    after: TResponseInputItem = {
        "type": "message",
        "role": "user",
        "content": "start over: open a.py",
    }

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            await session.add_items(before)

            await session.clear_session()

            assert await session.get_items() == [GOAL_MESSAGE]
            assert await session.pop_item() is None
            await session.add_items([after])
            assert await session.get_items() == [GOAL_MESSAGE, after]
            assert await logged_items(session) == [*before, after]

    run(scenario)


def test_unknown_items_are_kept_in_the_log_and_reported_excluded_without_an_exception(
    server: Server, session_id: str
) -> None:
    # Items of types newer than the SDK's own: typed as input items only by a cast.
    marker = cast(TResponseInputItem, {"type": "sdk_future_item", "note": "a type unknown"})
    later = cast(TResponseInputItem, {"type": "another_future_item", "payload": [1, 2]})

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            await set_goal(session)
            model = ScriptedModel([[assistant_message("Hello.", item_id="a1")]])
            agent: Agent[Any] = Agent(name="helper", model=model)
            config = RunConfig(
                call_model_input_filter=session.call_model_input_filter, tracing_disabled=True
            )
            prompt: TResponseInputItem = {"type": "message", "role": "user", "content": "hi"}

            await Runner.run(agent, [prompt, marker], session=session, run_config=config)
            await session.add_items([later])

            logged = [
                each
                async for each in session.client.iter_items(session_id)
                if each.type.endswith("_future_item")
            ]
            assert [each.item for each in logged] == [marker, later]
            assert session.excluded == [
                models.ExcludedItem(seq=each.seq, type=each.type, reason="unknown_type")
                for each in logged
            ]
            # The model was given the assembly, which shows only what it can read.
            assert model.calls[0].input == [GOAL_MESSAGE, prompt]
            assert (await session.get_items())[1:] == [
                prompt,
                {
                    "id": "a1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "Hello.", "annotations": [], "logprobs": []}
                    ],
                },
            ]

    run(scenario)


def test_the_model_recalls_an_output_compaction_cleared_and_a_refused_recall_is_its_answer(
    server: Server, session_id: str
) -> None:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        client.create_session(session_id=session_id, model="gpt-4o")
        client.put_goal(session_id, text=GOAL)
        cleared = clear_an_earlier_run(client, session_id)

    def recall_call(turn: int, arguments: dict[str, Any]) -> TResponseOutputItem:
        return function_call(RECALL_TOOL_NAME, arguments, call_id=f"recall-{turn}")

    def search(call: ModelCall) -> ModelStep:
        seq = cleared_seq(json.dumps(call.input))
        arguments = {"seq": seq, "pattern": BAD_PATTERN}
        return ModelStep(output=[assistant_message(SEARCH_TEXT), recall_call(1, arguments)])

    def read(call: ModelCall) -> ModelStep:
        seq = cleared_seq(json.dumps(call.input))
        return ModelStep(output=[assistant_message(READ_TEXT), recall_call(2, {"seq": seq})])

    def answer(call: ModelCall) -> ModelStep:
        (recalled,) = [
            item["output"]
            for item in call.input
            if item.get("type") == "function_call_output" and item["call_id"] == "recall-2"
        ]
        return ModelStep(output=[assistant_message(failure_answer(recalled))])

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            model = ScriptedModel([ModelStep.respond(each) for each in (search, read, answer)])
            agent: Agent[Any] = Agent(name="swe", model=model, tools=[session.recall_tool()])
            config = RunConfig(
                call_model_input_filter=session.call_model_input_filter, tracing_disabled=True
            )

            result = await Runner.run(agent, RECALL_PROMPT, session=session, run_config=config)

            # What the model was told each recall gave: the service's own text, never an error.
            received = {
                item["call_id"]: item["output"]
                for item in model.calls[-1].input
                if item.get("type") == "function_call_output"
            }
            assert (received["recall-1"], received["recall-2"]) == (
                cleared.refused,
                cleared.recalled,
            )
            assert result.final_output == failure_answer(cleared.recalled)
            # The calls and their outputs are in the log like any other tool's.
            logged = await logged_items(session)
            assert logged == [*EARLIER_RUN, *items_of_run(RECALL_PROMPT, result)]
            assert [
                (item["name"], json.loads(item["arguments"]))
                for item in logged
                if item.get("type") == "function_call"
            ] == [
                ("run_tests", {"path": "tests/test_fields.py"}),
                (RECALL_TOOL_NAME, {"seq": cleared.output_seq, "pattern": BAD_PATTERN}),
                (RECALL_TOOL_NAME, {"seq": cleared.output_seq}),
            ]
            assert [
                (item["call_id"], item["output"])
                for item in logged
                if item.get("type") == "function_call_output"
            ] == [
                ("earlier-1", EARLIER_RUN[2]["output"]),
                ("recall-1", cleared.refused),
                ("recall-2", cleared.recalled),
            ]
            # The provider is sent the tool the service offers beside the assembly.
            assert session.link.last_assembly is not None
            sent = Converter.convert_tools(model.calls[0].tools, []).tools
            assert sent == session.link.last_assembly.tools

    run(scenario)


def test_example_runs_offline_recalls_what_compaction_left_out_and_writes_its_session(
    server: Server,
) -> None:
    # A fresh copy of the example's module: its made-up repository as it was before the run,
    # so that replaying the script's calls on it gives the outputs the run logged.
    example = runpy.run_path(str(EXAMPLE))
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env={**os.environ, "CONTEXTD_URL": server.base, "CONTEXTD_API_KEY": API_KEY},
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    session_id = lines[0].removeprefix("session ")
    turns = example["TURNS"]
    turn_lines = [line for line in lines[1:-2] if line.startswith("turn ")]
    assert [line.split(":")[0] for line in turn_lines] == [
        f"turn {number}" for number in range(1, len(turns) + 1)
    ]
    (recall_line,) = [line for line in turn_lines if line.endswith(f"-> {RECALL_TOOL_NAME}")]
    assert any("compaction fired" in line for line in turn_lines[: turn_lines.index(recall_line)])
    # What the model read back is what it goes on with: it says so before its next turn's line.
    failure = {
        "test": "test_parse_port_strips_whitespace",
        "error": "ValueError: not a port: ' 8080\\n'",
    }
    recalled = f"recalled: {failure['test']} failed with {failure['error']}"
    assert lines[lines.index(recall_line) + 1] == recalled
    assert lines[-2] == f"answer: {turns[-1].text.format(**failure)}"

    async def scenario() -> None:
        async with contextd_session(server, session_id) as session:
            logged = await logged_items(session)
            expected: list[Item] = [{"type": "message", "role": "user", "content": example["TASK"]}]
            for index, turn in enumerate(turns, start=1):
                text = turn.text.format(**failure) if index == len(turns) else turn.text
                expected.append(
                    {
                        "id": f"msg-{index}",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [
                            {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                        ],
                    }
                )
                call_ids = [f"call-{index}-{number}" for number in range(1, len(turn.calls) + 1)]
                outputs: list[Item] = []
                for call_id, (name, arguments) in zip(call_ids, turn.calls, strict=True):
                    if name == RECALL_TOOL_NAME:
                        # The span the model searched is the one its context named.
                        (called,) = [i for i in logged if i.get("id") == call_id]
                        arguments = json.loads(called["arguments"])
                        recall = await session.client.recall(session_id, **arguments)
                        output = recall.tool_output
                    else:
                        output = example[name](**arguments)
                    expected.append(
                        {
                            "type": "function_call",
                            "id": call_id,
                            "call_id": call_id,
                            "name": name,
                            "arguments": json.dumps(arguments, separators=(",", ":")),
                        }
                    )
                    outputs.append(
                        {"type": "function_call_output", "call_id": call_id, "output": output}
                    )
                expected += outputs
            assert logged == expected
            # The first test run's output is among the facts the model searched.
            (searched,) = [
                json.loads(i["arguments"]) for i in logged if i.get("name") == RECALL_TOOL_NAME
            ]
            (first_run,) = [
                each.seq
                async for each in session.client.iter_items(session_id)
                if each.item.get("type") == "function_call_output"
                and each.item["call_id"] == "call-1-1"
            ]
            assert searched["from_seq"] <= first_run <= searched["to_seq"]

    run(scenario)
