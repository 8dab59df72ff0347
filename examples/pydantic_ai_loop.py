"""A Pydantic AI agent on contextd, offline: a scripted model (no provider, no key) fixes a
rounding bug in a small in-memory repository with three tools, while `ContextdHistory` records
every message in a contextd session and sends the model the assembled context instead of the
run's own message list.

Start the service (`make run`), then run `.venv/bin/python examples/pydantic_ai_loop.py
[SESSION_ID]`. `CONTEXTD_URL` (default http://127.0.0.1:8000) and `CONTEXTD_API_KEY` say where and
as whom. Each model call prints the assembly it was sent, its exact tokens, the usage the scripted
model reports for it, and whether compaction ran first: the session's window is small, so it does
part-way through, clearing old tool outputs. Before its answer the model wants the first test run's
failure back. Its context names what it left out by fact seq ("the full output is fact seq 5", "not
shown in this context: fact seqs 2–14"), so it searches those facts with the recall tool
`ContextdHistory` gives the agent, and answers with what it read, printed as `recalled`. The run is
driven with `run_sync`, from blocking code."""

from __future__ import annotations

import os
import re
import sys
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from contextd_client import ContextdClient
from contextd_client.pydantic_ai import ContextdHistory
from contextd_client.recall import RECALL_TOOL_NAME
from contextd_client.runtime import LinkOptions

GOAL = "Make to_milliseconds(0.345) return 345, not 344, with the whole test suite passing."
TASK = "tests/test_units.py fails on main: find out why and fix it."
SYSTEM_PROMPT = "You are a careful engineer. One tool call per turn; say why before making it."
WINDOW = 4_000
"""A window this run outgrows after a few tool outputs, so that compaction is advised."""
OVERHEAD = 250
"""What the scripted provider counts beyond the assembled context (tool schemas, framing)."""

UNITS = range(2, 14)
CONVERSIONS = "".join(
    f"\n\ndef to_unit_{n}(seconds: float) -> float:\n"
    f'    """`seconds` in units of 1/{n} s, for the report columns."""\n'
    f"    return seconds * {n}\n"
    for n in UNITS
)
REPOSITORY = {
    "src/units.py": "def to_milliseconds(seconds: float) -> int:\n    return int(seconds * 1000)"
    + CONVERSIONS,
    "tests/test_units.py": "from units import to_milliseconds\n\n\n"
    "def test_to_milliseconds_rounds():\n    assert to_milliseconds(0.345) == 345\n",
}


def run_tests(path: str) -> str:
    """Runs the tests under `path` and returns pytest's report."""
    passing = "".join(f"{path}::test_to_unit_{n} PASSED\n" for n in UNITS)
    if "round(" in REPOSITORY["src/units.py"]:
        return f"{passing}{path}::test_to_milliseconds_rounds PASSED\n{len(UNITS) + 1} passed"
    return (
        f"{passing}{path}::test_to_milliseconds_rounds FAILED\n"
        "E       assert 344 == 345\n"
        f"E        +  where 344 = to_milliseconds(0.345)\n{len(UNITS)} passed, 1 failed"
    )


def read_file(path: str) -> str:
    """Returns the file at `path`, with line numbers."""
    lines = REPOSITORY[path].splitlines()
    return "\n".join(f"{number:4}  {line}" for number, line in enumerate(lines, start=1))


def replace_in_file(path: str, old: str, new: str) -> str:
    """Replaces the one occurrence of `old` in the file at `path` with `new`."""
    if REPOSITORY[path].count(old) != 1:
        return f"`{old}` does not occur exactly once in {path}"
    REPOSITORY[path] = REPOSITORY[path].replace(old, new)
    return f"{path}: replaced 1 occurrence"


TURNS = [
    ("First, the failure itself.", "run_tests", {"path": "tests/test_units.py"}),
    ("to_milliseconds gives 344: the conversion.", "read_file", {"path": "src/units.py"}),
    (
        "int() truncates 344.99999999999994 down; round() is what is meant.",
        "replace_in_file",
        {"path": "src/units.py", "old": "int(seconds * 1000)", "new": "round(seconds * 1000)"},
    ),
    ("The fix is in; the test that failed first.", "run_tests", {"path": "tests/test_units.py"}),
    ("And the whole suite.", "run_tests", {"path": "tests"}),
]
RECALL_TEXT = "The first run's failure is no longer in my context: searching what it left out."
RECALL = f"call_{len(TURNS) + 1}"
"""The model's recall call: its output holds the failure the answer after it reports."""
ANSWER = (
    "Fixed: to_milliseconds rounds instead of truncating, so {test}, which failed with"
    " `{error}`, passes now; all {passing} tests pass."
)
NAMED = re.compile(r"fact seqs? (\d+)(?:–(\d+))?")


def left_out(messages: list[ModelMessage]) -> dict[str, int]:
    """The span of facts the context names as shortened or left out ("fact seq 5", "fact
    seqs 2–14"), as the recall tool's `from_seq` and `to_seq`."""
    shown = [getattr(part, "content", None) for message in messages for part in message.parts]
    text = "\n".join(each for each in shown if isinstance(each, str))
    seqs = [int(seq) for found in NAMED.finditer(text) for seq in found.groups() if seq]
    if not seqs:
        raise RuntimeError("compaction was to have left the first test run out by now")
    return {"from_seq": min(seqs), "to_seq": max(seqs)}


def failure_of(messages: list[ModelMessage]) -> dict[str, str]:
    """The failing test and its error, as the recall's output listed them."""
    (recalled,) = [
        part.model_response_str()
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_call_id == RECALL
    ]
    test = re.search(r"::(\w+) FAILED$", recalled, flags=re.MULTILINE)
    error = re.search(r"\bE {2,}(.+)$", recalled, flags=re.MULTILINE)
    if test is None or error is None:
        raise RuntimeError(f"the recall did not find the failure: {recalled!r}")
    return {"test": test.group(1), "error": error.group(1)}


def main() -> int:
    url = os.environ.get("CONTEXTD_URL", "http://127.0.0.1:8000")
    api_key = os.environ.get("CONTEXTD_API_KEY")
    session_id = sys.argv[1] if len(sys.argv) > 1 else f"pydantic-ai-loop-{uuid.uuid4().hex[:8]}"
    with ContextdClient(url, api_key=api_key) as contextd:
        contextd.create_session(session_id=session_id, context_window=WINDOW)
        contextd.put_goal(session_id, text=GOAL)

    # Old tool outputs are cleared first, each leaving a placeholder that names its seq.
    options = LinkOptions(compact_strategy="clear_tool_results")
    with ContextdHistory(session_id, base_url=url, api_key=api_key, options=options) as history:
        calls = compactions = 0

        def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            nonlocal calls, compactions
            assembly = history.link.last_assembly
            assert assembly is not None, "ContextdHistory assembles before every call"
            calls += 1
            # A compaction that would free too little writes nothing: count those that applied.
            applied = sum(compaction.applied for compaction in history.link.compactions)
            compacted, compactions = applied > compactions, applied
            usage = RequestUsage(
                input_tokens=assembly.total_tokens + OVERHEAD,
                cache_read_tokens=assembly.cache.reused_prefix_tokens,
                output_tokens=40,
            )
            print(
                f"call {calls}: assembly {assembly.assembly_id}, {assembly.total_tokens} tokens "
                f"in {len(messages)} messages, usage in/cached/out "
                f"{usage.input_tokens}/{usage.cache_read_tokens}/{usage.output_tokens}, "
                f"compacted first: {'yes' if compacted else 'no'}"
            )
            if calls <= len(TURNS):
                text, tool, arguments = TURNS[calls - 1]
                call = ToolCallPart(tool, arguments, tool_call_id=f"call_{calls}")
                return ModelResponse(parts=[TextPart(text), call], usage=usage)
            if calls == len(TURNS) + 1:
                search = {**left_out(messages), "pattern": " FAILED$|^E "}
                call = ToolCallPart(RECALL_TOOL_NAME, search, tool_call_id=RECALL)
                return ModelResponse(parts=[TextPart(RECALL_TEXT), call], usage=usage)
            failure = failure_of(messages)
            print(f"recalled: {failure['test']} failed with {failure['error']}")
            answer = ANSWER.format(**failure, passing=len(UNITS) + 1)
            return ModelResponse(parts=[TextPart(answer)], usage=usage)

        agent = Agent(
            # OpenAI models take system prompts where they stand, as this profile says.
            FunctionModel(
                scripted_model, profile=ModelProfile(supports_inline_system_prompts=True)
            ),
            system_prompt=SYSTEM_PROMPT,
            tools=[run_tests, read_file, replace_in_file],
            capabilities=[history],
        )
        result = agent.run_sync(TASK)

    print(f"answer: {result.output}")
    print(f"session {session_id}: {len(result.all_messages())} messages mirrored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
