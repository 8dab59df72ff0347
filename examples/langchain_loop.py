"""A LangChain agent on contextd, offline: a scripted model (no provider, no key) fixes a
rounding bug in a small made-up repository through three tools, while `ContextdMiddleware`
records every message in a contextd session and hands the model the assembled context.

Start the service (`make run`), then run `.venv/bin/python examples/langchain_loop.py`.
`CONTEXTD_URL` (default http://127.0.0.1:8000) and `CONTEXTD_API_KEY` say where and as whom. Each
turn prints the assembly the model was given, its exact tokens, the usage the model reported, and
whether compaction fired first: the session's window is kept small so that it does mid-run, clearing
old tool outputs. Before its answer the model wants the first test run's failure back. Its context
names what it left out by fact seq ("the full output is fact seq 5", "not shown in this context:
fact seqs 2–14"), so it searches those facts with the recall tool the middleware gives the agent,
and answers with what it read, printed as `recalled`."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
    UsageMetadata,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool

from contextd_client import ContextdClient
from contextd_client.langchain import ContextdMiddleware
from contextd_client.recall import RECALL_TOOL_NAME
from contextd_client.runtime import LinkOptions

GOAL = "Make to_milliseconds(0.345) return 345, not 344, and keep the test suite green."
TASK = "tests/test_durations.py fails on main. Find out why and fix it."
INSTRUCTIONS = "You are a careful engineer. Use one tool per turn and say why before calling it."
WINDOW = 4_000
"""A window this run outgrows after a few tool outputs, so that compaction is advised."""

HELPERS = "".join(
    f"\n\ndef scale_{n}(value: float) -> float:\n"
    f'    """Scales `value` by {n} for the report columns."""\n'
    f"    return value * {n}\n"
    for n in range(2, 40)
)
REPOSITORY = {
    "src/durations.py": (
        "def to_milliseconds(seconds: float) -> int:\n    return int(seconds * 1000)" + HELPERS
    ),
    "tests/test_durations.py": (
        "from durations import to_milliseconds\n\n\n"
        "def test_to_milliseconds_rounds():\n    assert to_milliseconds(0.345) == 345\n"
    ),
}


@tool
def run_tests(path: str) -> str:
    """Runs the tests in `path` and returns pytest's output."""
    source = REPOSITORY["src/durations.py"]
    collected = "".join(f"{path}::test_scale_{n} PASSED\n" for n in range(2, 40))
    if "round(" in source:
        return f"{collected}{path}::test_to_milliseconds_rounds PASSED\n39 passed"
    return (
        f"{collected}{path}::test_to_milliseconds_rounds FAILED\n"
        "    assert to_milliseconds(0.345) == 345\n"
        "E   assert 344 == 345\n"
        "1 failed, 38 passed"
    )


@tool
def read_file(path: str) -> str:
    """Returns the file at `path`."""
    return REPOSITORY.get(path, f"no such file: {path}")


@tool
def edit_file(path: str, search: str, replace: str) -> str:
    """Replaces `search` by `replace` in the file at `path`."""
    if search not in REPOSITORY.get(path, ""):
        return f"not found in {path}: {search}"
    REPOSITORY[path] = REPOSITORY[path].replace(search, replace)
    return f"edited {path}"


def tool_call(name: str, call_id: str, **args: Any) -> ToolCall:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


RECALL = "call-6"
"""The model's recall call: its output holds the failure the answer after it reports."""
ANSWERS = [
    AIMessage(
        "Let me see the failure first.",
        tool_calls=[tool_call("run_tests", "call-1", path="tests/test_durations.py")],
    ),
    AIMessage(
        "to_milliseconds is the suspect; let me read it.",
        tool_calls=[tool_call("read_file", "call-2", path="src/durations.py")],
    ),
    AIMessage(
        "int() truncates 0.345 * 1000 = 344.99999999999994 to 344; round() gives 345.",
        tool_calls=[
            tool_call(
                "edit_file",
                "call-3",
                path="src/durations.py",
                search="int(seconds * 1000)",
                replace="round(seconds * 1000)",
            )
        ],
    ),
    AIMessage(
        "Now the suite again.",
        tool_calls=[tool_call("run_tests", "call-4", path="tests/test_durations.py")],
    ),
    AIMessage(
        "Let me read the test to be sure it asks for rounding.",
        tool_calls=[tool_call("read_file", "call-5", path="tests/test_durations.py")],
    ),
    # The span to search is filled in from what the context names as left out.
    AIMessage(
        "The first run's failure is no longer in my context: searching what it left out.",
        tool_calls=[tool_call(RECALL_TOOL_NAME, RECALL, pattern=" FAILED$|^E ")],
    ),
    AIMessage(
        "Fixed: to_milliseconds rounds instead of truncating, so {test}, which failed with"
        " `{error}`, passes now, and so do all 39 tests."
    ),
]
NAMED = re.compile(r"fact seqs? (\d+)(?:–(\d+))?")


def left_out(messages: list[BaseMessage]) -> dict[str, int]:
    """The span of facts the context names as shortened or left out ("fact seq 5", "fact
    seqs 2–14"), as the recall tool's `from_seq` and `to_seq`."""
    shown = json.dumps(convert_to_openai_messages(messages), ensure_ascii=False)
    seqs = [int(seq) for found in NAMED.finditer(shown) for seq in found.groups() if seq]
    if not seqs:
        raise RuntimeError("compaction was to have left the first test run out by now")
    return {"from_seq": min(seqs), "to_seq": max(seqs)}


def failure_of(messages: list[BaseMessage]) -> dict[str, str]:
    """The failing test and its error, as the recall's output listed them."""
    (recalled,) = [
        m.text for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == RECALL
    ]
    test = re.search(r"::(\w+) FAILED$", recalled, flags=re.MULTILINE)
    error = re.search(r"\bE {2,}(.+)$", recalled, flags=re.MULTILINE)
    if test is None or error is None:
        raise RuntimeError(f"the recall did not find the failure: {recalled!r}")
    return {"test": test.group(1), "error": error.group(1)}


class ScriptedModel(GenericFakeChatModel):
    """Answers with the script, reporting usage as a provider would (estimated here from the
    characters it received, about four per token). A recall searches the facts the model was
    told were left out; the answer after it uses what it read."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = super()._generate(messages, stop, run_manager, **kwargs).generations[0].message
        assert isinstance(answer, AIMessage)
        calls = [
            {**call, "args": {**left_out(messages), **call["args"]}}
            if call["name"] == RECALL_TOOL_NAME
            else call
            for call in answer.tool_calls
        ]
        text: str = answer.text
        if "{test}" in text:
            failure = failure_of(messages)
            print(f"recalled: {failure['test']} failed with {failure['error']}")
            text = text.format(**failure)
        answer = answer.model_copy(update={"content": text, "tool_calls": calls})
        input_tokens = sum(len(message.text) for message in messages) // 4
        output_tokens = len(answer.text) // 4 + 10
        usage: UsageMetadata = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        return ChatResult(
            generations=[
                ChatGeneration(message=answer.model_copy(update={"usage_metadata": usage}))
            ]
        )

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self  # the script already knows which tool it calls


def main() -> None:
    base_url = os.environ.get("CONTEXTD_URL", "http://127.0.0.1:8000")
    api_key = os.environ.get("CONTEXTD_API_KEY")
    session_id = f"langchain-loop-{uuid.uuid4().hex[:12]}"
    with ContextdClient(base_url, api_key=api_key) as client:
        contextd = ContextdMiddleware(
            client,
            session_id=session_id,
            # Old tool outputs are cleared first, each leaving a placeholder that names its seq.
            options=LinkOptions(
                compact_strategy="clear_tool_results",
                session={"model": "gpt-4o", "context_window": WINDOW},
            ),
        )
        link = contextd.link(session_id)
        link.ensure_session()
        client.put_goal(session_id, text=GOAL)
        agent = create_agent(
            ScriptedModel(messages=iter(ANSWERS)),
            tools=[run_tests, read_file, edit_file],
            system_prompt=INSTRUCTIONS,
            middleware=[contextd],
        )
        print(f"session {session_id}")
        turn = 0
        compactions = 0
        for update in agent.stream({"messages": [HumanMessage(TASK)]}, stream_mode="updates"):
            if "model" not in update:
                continue
            turn += 1
            assembly = link.last_assembly
            assert assembly is not None
            answer = update["model"]["messages"][-1]
            usage = answer.usage_metadata or {}
            # A compaction that would free too little writes nothing: count those that applied.
            applied = sum(compaction.applied for compaction in link.compactions)
            fired, compactions = applied > compactions, applied
            action = ", ".join(each["name"] for each in answer.tool_calls) or "answers"
            print(
                f"turn {turn}: assembly {assembly.assembly_id}, {assembly.total_tokens} tokens "
                f"assembled, {usage.get('input_tokens', 0)} input tokens reported, "
                f"compaction {'fired (' + link.compactions[-1].strategy + ')' if fired else 'no'}"
                f" -> {action}"
            )
        session = client.get_session(session_id)
        print(
            f"done: {session.item_count} items in the log, {session.compactions} compaction(s), "
            f"{session.active_tokens} tokens active"
        )


if __name__ == "__main__":
    main()
