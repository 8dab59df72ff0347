"""A Pydantic AI agent on contextd, offline: a scripted model (no provider, no key) fixes a
rounding bug in a small in-memory repository with three tools, while `ContextdHistory` records
every message in a contextd session and sends the model the assembled context instead of the
run's own message list.

Start the service (`make run`), then run `python examples/pydantic_ai_loop.py [SESSION_ID]`.
`CONTEXTD_URL` (default http://127.0.0.1:8000) and `CONTEXTD_API_KEY` say where and as whom.
Each model call prints the assembly it was sent, its exact tokens, the usage the scripted
model reports for it, and whether compaction ran first: the session's window is small, so it
does part-way through. The run is driven with `run_sync`, from blocking code.
"""

from __future__ import annotations

import os
import sys
import uuid

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from contextd_client import ContextdClient
from contextd_client.pydantic_ai import ContextdHistory

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
ANSWER = f"Fixed: to_milliseconds rounds instead of truncating; all {len(UNITS) + 1} tests pass."


def main() -> int:
    url = os.environ.get("CONTEXTD_URL", "http://127.0.0.1:8000")
    api_key = os.environ.get("CONTEXTD_API_KEY")
    session_id = sys.argv[1] if len(sys.argv) > 1 else f"pydantic-ai-loop-{uuid.uuid4().hex[:8]}"
    with ContextdClient(url, api_key=api_key) as contextd:
        contextd.create_session(session_id=session_id, context_window=WINDOW)
        contextd.put_goal(session_id, text=GOAL)

    with ContextdHistory(session_id, base_url=url, api_key=api_key) as history:
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
            if calls > len(TURNS):
                return ModelResponse(parts=[TextPart(ANSWER)], usage=usage)
            text, tool, arguments = TURNS[calls - 1]
            call = ToolCallPart(tool, arguments, tool_call_id=f"call_{calls}")
            return ModelResponse(parts=[TextPart(text), call], usage=usage)

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
