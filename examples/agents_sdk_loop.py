"""An OpenAI Agents SDK agent on contextd, offline: the SDK's own `ScriptedModel` (no provider,
no key) plays an engineer fixing a port parser in a small made-up repository through three
tools, while `ContextdSession` keeps the run in a contextd session and its model-input filter
hands the model the assembled context.

Start the service (`make run`), then run `.venv/bin/python examples/agents_sdk_loop.py`.
`CONTEXTD_URL` (default http://127.0.0.1:8000) and `CONTEXTD_API_KEY` say where and as whom. Each
turn prints the assembly the model was given, its exact tokens, the usage the model reported, and
whether compaction fired first: the session's window is kept small so that it does mid-run, clearing
old tool outputs. Late in the run the model wants the first test run's failure back. Its context no
longer shows it, but names what it left out by fact seq ("the full output is fact seq 5", "not shown
in this context: fact seqs 2–14"), so the model searches those facts with the recall tool
(`session.recall_tool()`) and answers with what it read, printed as `recalled`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    Runner,
    Tool,
    Usage,
    function_tool,
)
from agents.items import TResponseOutputItem
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from contextd_client.agents import ContextdSession, ContextdUsageHooks
from contextd_client.items import Item
from contextd_client.recall import RECALL_TOOL_NAME
from contextd_client.runtime import LinkOptions

GOAL = "Make parse_port(' 8080\\n') return 8080, and keep every config test passing."
TASK = "Our service refuses PORT values read from a file. tests/test_config.py shows it."
INSTRUCTIONS = "You are a careful engineer. Say what you look for before each tool call."
WINDOW = 4_000
"""A window this run outgrows after a few tool outputs, so that compaction is advised."""

CASES = [f"test_parse_port_accepts_{port}" for port in range(1024, 1064)]
REPOSITORY = {
    "src/config.py": (
        "def parse_port(text: str) -> int:\n"
        "    if not text.isdigit():\n"
        "        raise ValueError(f'not a port: {text!r}')\n"
        "    return int(text)\n"
    ),
    "tests/test_config.py": "".join(
        f"def {case}():\n    assert parse_port('{case[-4:]}') == {case[-4:]}\n\n" for case in CASES
    )
    + "def test_parse_port_strips_whitespace():\n    assert parse_port(' 8080\\n') == 8080\n",
}


def run_tests(path: str) -> str:
    """Runs the tests in `path` and returns pytest's output."""
    passed = "".join(f"{path}::{case} PASSED\n" for case in CASES)
    if ".strip()" in REPOSITORY["src/config.py"]:
        return f"{passed}{path}::test_parse_port_strips_whitespace PASSED\n{len(CASES) + 1} passed"
    return (
        f"{passed}{path}::test_parse_port_strips_whitespace FAILED\n"
        "E   ValueError: not a port: ' 8080\\n'\n"
        f"1 failed, {len(CASES)} passed"
    )


def read_file(path: str) -> str:
    """Returns the file at `path`."""
    return REPOSITORY.get(path, f"no such file: {path}")


def edit_file(path: str, search: str, replace: str) -> str:
    """Replaces `search` by `replace` in the file at `path`."""
    if search not in REPOSITORY.get(path, ""):
        return f"not found in {path}: {search}"
    REPOSITORY[path] = REPOSITORY[path].replace(search, replace)
    return f"edited {path}"


TOOLS: list[Tool] = [function_tool(each) for each in (run_tests, read_file, edit_file)]


@dataclass(frozen=True)
class Turn:
    """One answer of the scripted model: what it says, and the tools it calls with what."""

    text: str
    calls: tuple[tuple[str, dict[str, str | int]], ...] = ()


TURNS = [
    Turn("First the failure itself.", (("run_tests", {"path": "tests/test_config.py"}),)),
    Turn("The parser is the suspect; let me read it.", (("read_file", {"path": "src/config.py"}),)),
    Turn(
        "isdigit() is False for ' 8080\\n': the text must be stripped before it is checked.",
        (
            (
                "edit_file",
                {
                    "path": "src/config.py",
                    "search": "def parse_port(text: str) -> int:\n",
                    "replace": "def parse_port(text: str) -> int:\n    text = text.strip()\n",
                },
            ),
        ),
    ),
    Turn("The suite again.", (("run_tests", {"path": "tests/test_config.py"}),)),
    Turn(
        "And the tests themselves, to be sure.", (("read_file", {"path": "tests/test_config.py"}),)
    ),
    Turn(
        "The first run's failure is no longer in my context: searching what it left out.",
        ((RECALL_TOOL_NAME, {"pattern": " FAILED$|^E "}),),
    ),
    Turn(
        "Fixed: parse_port strips the text first, so {test}, which failed with {error}, passes"
        " now, as does every other config test."
    ),
]
RECALL = "call-6-1"
NAMED = re.compile(r"fact seqs? (\d+)(?:–(\d+))?")


def left_out(received: list[Item]) -> dict[str, int]:
    """The span of facts the context names as shortened or left out ("fact seq 5", "fact
    seqs 2–14"), as the recall tool's `from_seq` and `to_seq`."""
    seqs = [
        int(seq)
        for found in NAMED.finditer(json.dumps(received, ensure_ascii=False))
        for seq in found.groups()
        if seq
    ]
    if not seqs:
        raise RuntimeError("compaction was to have left the first test run out by now")
    return {"from_seq": min(seqs), "to_seq": max(seqs)}


def failure_of(received: list[Item]) -> dict[str, str]:
    """The failing test and its error, as the recall's output listed them."""
    (recalled,) = [
        item["output"]
        for item in received
        if item.get("type") == "function_call_output" and item["call_id"] == RECALL
    ]
    test = re.search(r"::(\w+) FAILED$", recalled, flags=re.MULTILINE)
    error = re.search(r"\bE {2,}(.+)$", recalled, flags=re.MULTILINE)
    if test is None or error is None:
        raise RuntimeError(f"the recall did not find the failure: {recalled!r}")
    return {"test": test.group(1), "error": error.group(1)}


def answer(turn_index: int) -> ModelStep:
    """The scripted model's answer at `turn_index`, with the usage a provider would report
    (estimated from the characters it received, about four per token). A recall names the
    seq the model was shown; the answer after it uses what it read."""

    def respond(call: ModelCall) -> ModelStep:
        turn = TURNS[turn_index]
        text = turn.text
        if "{test}" in text:
            failure = failure_of(call.input)
            print(f"recalled: {failure['test']} failed with {failure['error']}")
            text = text.format(**failure)
        output: list[TResponseOutputItem] = [
            assistant_message(text, item_id=f"msg-{turn_index + 1}")
        ]
        for number, (tool, arguments) in enumerate(turn.calls, start=1):
            call_id = f"call-{turn_index + 1}-{number}"
            if tool == RECALL_TOOL_NAME:
                arguments = {**left_out(call.input), **arguments}
            output.append(function_call(tool, arguments, call_id=call_id))
        received = len(json.dumps(call.input)) + len(call.system_instructions or "")
        usage = Usage(requests=1, input_tokens=received // 4, output_tokens=len(text) // 4)
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        return ModelStep(output=output, usage=usage)

    return ModelStep.respond(respond)


class PrintingHooks(ContextdUsageHooks):
    """Reports each call's usage to contextd (the parent's job), then prints the turn."""

    turn = 0
    compactions = 0

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await super().on_llm_end(context, agent, response)
        link = self.session.link
        assert link.last_assembly is not None
        self.turn += 1
        # A compaction that would free too little writes nothing: count those that applied.
        applied = sum(compaction.applied for compaction in link.compactions)
        fired, self.compactions = applied > self.compactions, applied
        calls = [item.name for item in response.output if item.type == "function_call"]
        print(
            f"turn {self.turn}: assembly {link.last_assembly.assembly_id}, "
            f"{link.last_assembly.total_tokens} tokens assembled, "
            f"{response.usage.input_tokens} input tokens reported, "
            f"compaction {'fired (' + link.compactions[-1].strategy + ')' if fired else 'no'}"
            f" -> {', '.join(calls) or 'answers'}"
        )


async def main() -> None:
    session_id = f"agents-sdk-loop-{uuid.uuid4().hex[:12]}"
    async with ContextdSession(
        session_id,
        base_url=os.environ.get("CONTEXTD_URL", "http://127.0.0.1:8000"),
        api_key=os.environ.get("CONTEXTD_API_KEY"),
        # Old tool outputs are cleared first, each leaving a placeholder that names its seq.
        options=LinkOptions(
            compact_strategy="clear_tool_results",
            session={"model": "gpt-4o", "context_window": WINDOW},
        ),
    ) as session:
        await session.link.ensure_session()
        await session.client.put_goal(session_id, text=GOAL)
        agent = Agent(
            name="engineer",
            instructions=INSTRUCTIONS,
            model=ScriptedModel([answer(index) for index in range(len(TURNS))]),
            tools=[*TOOLS, session.recall_tool()],
        )
        print(f"session {session_id}")
        result = await Runner.run(
            agent,
            TASK,
            session=session,
            hooks=PrintingHooks(session),
            run_config=RunConfig(
                call_model_input_filter=session.call_model_input_filter, tracing_disabled=True
            ),
        )
        detail = await session.client.get_session(session_id)
        print(f"answer: {result.final_output}")
        print(
            f"done: {detail.item_count} items in the log, {detail.compactions} compaction(s), "
            f"{detail.active_tokens} tokens active"
        )


if __name__ == "__main__":
    asyncio.run(main())
