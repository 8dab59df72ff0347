"""A LangChain agent on contextd, offline: a scripted model (no provider, no key) fixes a
rounding bug in a small made-up repository through three tools, while `ContextdMiddleware`
records every message in a contextd session and hands the model the assembled context.

Start the service (`make run`), then run `python examples/langchain_loop.py`. `CONTEXTD_URL`
(default http://127.0.0.1:8000) and `CONTEXTD_API_KEY` say where and as whom. Each turn prints
the assembly the model was given, its exact tokens, the usage the model reported, and whether
compaction fired first: the session's window is kept small so that it does mid-run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool

from contextd_client import ContextdClient
from contextd_client.langchain import ContextdMiddleware
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
    AIMessage("Fixed: to_milliseconds rounds instead of truncating, and all 39 tests pass."),
]


class ScriptedModel(GenericFakeChatModel):
    """Answers with the script, reporting usage as a provider would (estimated here from the
    characters it received, about four per token)."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = super()._generate(messages, stop, run_manager, **kwargs).generations[0].message
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
            options=LinkOptions(session={"model": "gpt-4o", "context_window": WINDOW}),
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
            fired = len(link.compactions) > compactions
            compactions = len(link.compactions)
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
