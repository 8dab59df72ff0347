"""The LangChain v1 adapter against a real contextd process: `langchain.agents.create_agent`
drives its own loop with a scripted chat model replaying a recorded run, and every model call
must receive exactly the context contextd assembled for it.

The scripted model is langchain_core's `GenericFakeChatModel` (it replays a list of answers),
extended with the two things an agent needs from a model and the fake lacks: `bind_tools`, and a
record of every input it received. Tools answer each call with the output the run recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UsageMetadata,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, ConfigDict, Field

from contextd_client import AsyncContextdClient, ContextdClient, NotFound, models
from contextd_client.langchain import ContextdChatMessageHistory, ContextdMiddleware
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
GOAL_PART = {"type": "text", "text": GOAL_TEXT}
# What examples/langchain_loop.py writes: the task, five tool turns, a recall, the final answer,
# which reports what the recall read back.
EXAMPLE_ROLES = ["user", *["assistant", "tool"] * 6, "assistant"]
EXAMPLE_ANSWER = (
    "Fixed: to_milliseconds rounds instead of truncating, so test_to_milliseconds_rounds, which"
    " failed with `assert 344 == 345`, passes now, and so do all 39 tests."
)


class ScriptedChatModel(GenericFakeChatModel):
    """Answers with the script's turns in order and keeps every input it was given."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # The script already says which tools are called: there is nothing to bind.
        return self


class RespondingChatModel(BaseChatModel):
    """Answers each input with `respond(input)`, keeping every input and the tools it was
    bound, as the provider would be sent them."""

    respond: Callable[[list[BaseMessage]], AIMessage]
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "responding"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.respond(messages))])

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound = [convert_to_openai_tool(each) for each in tools]
        return self


def usage_of_turn(turn: int) -> UsageMetadata:
    """What the scripted provider reports for turn `turn` (distinct per turn)."""
    return {
        "input_tokens": 4000 + 10 * turn,
        "output_tokens": 50 + turn,
        "total_tokens": 4050 + 11 * turn,
        "input_token_details": {"cache_read": 1000 + turn},
    }


def scripted_model(script: Script) -> ScriptedChatModel:
    answers = [
        AIMessage(
            content=turn.text,
            tool_calls=[
                {"name": call["name"], "args": json.loads(call["arguments"]), "id": call["call_id"]}
                for call in turn.calls
            ],
            usage_metadata=usage_of_turn(n),
        )
        for n, turn in enumerate(script.turns)
    ]
    return ScriptedChatModel(messages=iter(answers))


class RecordedCall(BaseModel):
    """Any arguments, and the call's id, by which the tool finds the recorded output."""

    model_config = ConfigDict(extra="allow")
    call_id: Annotated[str, InjectedToolCallId]


def recorded_tools(script: Script) -> list[BaseTool]:
    def answer(call_id: str, **arguments: Any) -> str:
        return script.output_for(call_id)

    return [
        StructuredTool.from_function(
            func=answer, name=name, description=f"The recorded {name}.", args_schema=RecordedCall
        )
        for name in script.tool_names
    ]


class AssemblyLog(AgentMiddleware):
    """Placed inside `ContextdMiddleware`: notes, per model call, the assembly it was given."""

    def __init__(self, contextd: ContextdMiddleware) -> None:
        super().__init__()
        self.contextd = contextd
        self.assembly_ids: list[str] = []

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        assembly = self.contextd.link(self.contextd.session_of(request.runtime)).last_assembly
        assert assembly is not None
        self.assembly_ids.append(assembly.assembly_id)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        link = self.contextd.async_link(self.contextd.session_of(request.runtime))
        assert link.last_assembly is not None
        self.assembly_ids.append(link.last_assembly.assembly_id)
        return await handler(request)


def expected_input(assembled: list[dict[str, Any]], *, instructions: str) -> list[dict[str, Any]]:
    """What the model must receive for an assembly in `chat` form: the agent's system prompt
    and the leading developer messages as one system message, later developer messages as
    user messages, everything else as assembled."""
    leading = next(n for n, message in enumerate(assembled) if message["role"] != "developer")
    system = {
        "role": "system",
        "content": [
            {"type": "text", "text": instructions},
            *(part for message in assembled[:leading] for part in message["content"]),
        ],
    }
    later = [
        {"role": "user", "content": message["content"]}
        if message["role"] == "developer"
        else message
        for message in assembled[leading:]
    ]
    return [system, *later]


def as_chat(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return convert_to_openai_messages(messages, text_format="block")


def assert_each_call_got_its_assembly(
    ctx: ContextdClient,
    *,
    model: ScriptedChatModel,
    assembly_ids: list[str],
    script: Script,
    state: dict[str, Any],
) -> None:
    """Every input the model received is its call's stored assembly (goal pinned first and
    restated last, pairing valid), and not what the agent would have sent without contextd:
    its system prompt and its own list up to that answer."""
    messages: list[AnyMessage] = state["messages"]
    answers = [n for n, message in enumerate(messages) if isinstance(message, AIMessage)]
    raw_inputs = [as_chat([SystemMessage(script.instructions), *messages[:n]]) for n in answers]
    assert len(model.received) == len(script.turns) == len(assembly_ids) == len(raw_inputs)
    for received, assembly_id, raw in zip(model.received, assembly_ids, raw_inputs, strict=True):
        stored = ctx.get_assembly(assembly_id).response
        expected = expected_input(stored.messages, instructions=script.instructions)
        got = as_chat(received)
        assert got == as_chat(convert_to_messages(expected))
        assert got[0]["content"][1] == GOAL_PART
        # Restated last once the history is long, as its own human message.
        if any(item.id == "goal#restated" for item in stored.items):
            assert got[-1] == {"role": "user", "content": [GOAL_PART]}
        assert chat_pairing_holds(got)
        assert got != raw


def logged_messages(ctx: ContextdClient, session_id: str) -> list[dict[str, Any]]:
    return logged_as_sent(ctx, session_id, unknown_prefix="langchain:")


@pytest.fixture
def ctx(server: Server) -> Iterator[ContextdClient]:
    with ContextdClient(server.base, api_key=API_KEY) as blocking:
        yield blocking


def test_invoke_gives_the_model_each_calls_assembled_context_and_logs_every_message(
    ctx: ContextdClient, session_id: str
) -> None:
    script = load_script()
    contextd = ContextdMiddleware(
        ctx, session_id=session_id, options=LinkOptions(session={"model": "gpt-4o"})
    )
    contextd.link(session_id).ensure_session()
    ctx.put_goal(session_id, text=GOAL)
    assembly_log = AssemblyLog(contextd)
    model = scripted_model(script)
    agent = create_agent(
        model,
        tools=recorded_tools(script),
        system_prompt=script.instructions,
        middleware=[contextd, assembly_log],
    )

    state = agent.invoke({"messages": [HumanMessage(script.prompt)]})

    assert_each_call_got_its_assembly(
        ctx, model=model, assembly_ids=assembly_log.assembly_ids, script=script, state=state
    )
    # Every state message is logged once, in order, the final answer included.
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(state["messages"])
    assert state["messages"][-1].content == script.turns[-1].text
    assert contextd.link(session_id).compactions == []


def test_invoke_reports_each_calls_usage_against_the_assembly_it_was_given(
    ctx: ContextdClient, session_id: str
) -> None:
    script = load_script(turns=4)
    unit = "langchain-usage"
    contextd = ContextdMiddleware(
        ctx,
        session_id=session_id,
        options=LinkOptions(unit=unit, session={"model": "gpt-4o"}),
    )
    assembly_log = AssemblyLog(contextd)
    agent = create_agent(
        scripted_model(script),
        tools=recorded_tools(script),
        system_prompt=script.instructions,
        middleware=[contextd, assembly_log],
    )
    before = usage_counters(ctx.metrics(), unit=unit)

    agent.invoke({"messages": [HumanMessage(script.prompt)]})

    after = usage_counters(ctx.metrics(), unit=unit)
    usages = [usage_of_turn(n) for n in range(len(script.turns))]
    cached = sum(usage["input_token_details"]["cache_read"] for usage in usages)
    predicted = sum(
        ctx.get_assembly(each).response.cache.reused_prefix_tokens
        for each in assembly_log.assembly_ids
    )
    # Each report classified and its class stored on its assembly; those below the prediction
    # (the scripted provider caches less than contextd predicts) counted as misses too.
    outcomes = [ctx.get_assembly(each).cache_outcome for each in assembly_log.assembly_ids]
    misses = sum(outcome in ("below_minimum", "expired", "evicted") for outcome in outcomes)
    assert {kind: after[kind] - before.get(kind, 0.0) for kind in after} == {
        "cached": cached,
        "uncached": sum(usage["input_tokens"] for usage in usages) - cached,
        "output": sum(usage["output_tokens"] for usage in usages),
        "contextd_cache_actual_tokens_total": cached,
        "contextd_cache_predicted_tokens_total": predicted,
        "contextd_cache_outcomes_total": len(outcomes),
        **({"contextd_cache_misses_total": misses} if misses else {}),
    }
    # Each report named a distinct assembly of this session, so each calibrated it once.
    tokenizer = ctx.context_window(session_id).tokenizer
    assert (tokenizer.calibrated, tokenizer.samples) == (True, len(script.turns))


def test_small_window_run_compacts_when_advised_and_the_model_gets_the_compacted_context(
    ctx: ContextdClient, session_id: str
) -> None:
    script = load_script()
    contextd = ContextdMiddleware(
        ctx,
        session_id=session_id,
        options=LinkOptions(session={"model": "gpt-4o", "context_window": SMALL_WINDOW}),
    )
    contextd.link(session_id).ensure_session()
    ctx.put_goal(session_id, text=GOAL)
    assembly_log = AssemblyLog(contextd)
    model = scripted_model(script)
    agent = create_agent(
        model,
        tools=recorded_tools(script),
        system_prompt=script.instructions,
        middleware=[contextd, assembly_log],
    )

    state = agent.invoke({"messages": [HumanMessage(script.prompt)]})

    assert_each_call_got_its_assembly(
        ctx, model=model, assembly_ids=assembly_log.assembly_ids, script=script, state=state
    )
    compactions = contextd.link(session_id).compactions
    applied = [compaction for compaction in compactions if compaction.applied]
    assert applied != []
    assert [each.not_applied_because for each in compactions if not each.applied] == [
        "too_little_gain"
    ] * (len(compactions) - len(applied))
    assert ctx.get_session(session_id).compactions == len(applied)
    # The model got less than the agent holds; the log still holds all of it.
    assert len(model.received[-1]) < len(state["messages"])
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(state["messages"])


def test_ainvoke_gives_the_model_each_calls_assembled_context_and_reports_usage(
    ctx: ContextdClient, server: Server, session_id: str
) -> None:
    script = load_script(turns=6)
    model = scripted_model(script)

    async def run() -> tuple[dict[str, Any], list[str]]:
        async with AsyncContextdClient(server.base, api_key=API_KEY) as async_client:
            contextd = ContextdMiddleware(
                async_client=async_client,
                session_id=session_id,
                options=LinkOptions(session={"model": "gpt-4o"}),
            )
            await contextd.async_link(session_id).ensure_session()
            await async_client.put_goal(session_id, text=GOAL)
            assembly_log = AssemblyLog(contextd)
            agent = create_agent(
                model,
                tools=recorded_tools(script),
                system_prompt=script.instructions,
                middleware=[contextd, assembly_log],
            )
            state = await agent.ainvoke({"messages": [HumanMessage(script.prompt)]})
            return state, assembly_log.assembly_ids

    state, assembly_ids = asyncio.run(run())

    assert_each_call_got_its_assembly(
        ctx, model=model, assembly_ids=assembly_ids, script=script, state=state
    )
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(state["messages"])
    tokenizer = ctx.context_window(session_id).tokenizer
    assert (tokenizer.calibrated, tokenizer.samples) == (True, len(script.turns))


def test_thread_id_names_the_session_and_a_thread_resumed_appends_only_its_new_messages(
    ctx: ContextdClient, session_id: str
) -> None:
    script = load_script(turns=1)
    call_turn, final_turn = script.turns
    answers = [
        AIMessage("Done."),
        AIMessage(
            call_turn.text,
            tool_calls=[
                {"name": call["name"], "args": json.loads(call["arguments"]), "id": call["call_id"]}
                for call in call_turn.calls
            ],
        ),
        AIMessage(final_turn.text),
        AIMessage("Nothing else."),
    ]
    contextd = ContextdMiddleware(ctx)  # no session_id: each thread names its session
    agent = create_agent(
        ScriptedChatModel(messages=iter(answers)),
        tools=recorded_tools(script),
        system_prompt=script.instructions,
        middleware=[contextd],
        checkpointer=InMemorySaver(),
    )
    other_thread = f"{session_id}-other"
    other = agent.invoke(
        {"messages": [HumanMessage("Say done.")]},
        config={"configurable": {"thread_id": other_thread}},
    )
    config: RunnableConfig = {"configurable": {"thread_id": session_id}}
    first = agent.invoke({"messages": [HumanMessage(script.prompt)]}, config=config)

    second = agent.invoke({"messages": [HumanMessage("Anything else?")]}, config=config)

    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert [message.content for message in second["messages"][-2:]] == [
        "Anything else?",
        "Nothing else.",
    ]
    # Each message once: the resumed thread's earlier messages were not appended again.
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(second["messages"])
    assert logged_messages(ctx, other_thread) == convert_to_openai_messages(other["messages"])


def recalling_model() -> RespondingChatModel:
    """Finds the cleared output's seq in its input, searches it with a pattern the service
    refuses, reads it back, and answers with what it read."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        received = json.dumps(as_chat(messages))
        recalled = [
            message.text
            for message in messages
            if isinstance(message, ToolMessage) and message.tool_call_id.startswith("recall-")
        ]
        match recalled:
            case []:
                arguments = {"seq": cleared_seq(received), "pattern": BAD_PATTERN}
                return AIMessage(SEARCH_TEXT, tool_calls=[recall_call(1, arguments)])
            case [_refused]:
                arguments = {"seq": cleared_seq(received)}
                return AIMessage(READ_TEXT, tool_calls=[recall_call(2, arguments)])
            case _:
                return AIMessage(failure_answer(recalled[-1]))

    return RespondingChatModel(respond=respond)


def recall_call(turn: int, arguments: dict[str, Any]) -> ToolCall:
    return {
        "name": RECALL_TOOL_NAME,
        "args": arguments,
        "id": f"recall-{turn}",
        "type": "tool_call",
    }


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_model_recalls_an_output_compaction_cleared_and_a_refused_recall_is_its_answer(
    ctx: ContextdClient, server: Server, session_id: str, mode: str
) -> None:
    ctx.create_session(session_id=session_id, model="gpt-4o")
    ctx.put_goal(session_id, text=GOAL)
    cleared = clear_an_earlier_run(ctx, session_id)
    model = recalling_model()
    # No session_id: the thread names the session, for the recall tool too.
    config: RunnableConfig = {"configurable": {"thread_id": session_id}}

    async def ainvoke() -> dict[str, Any]:
        async with AsyncContextdClient(server.base, api_key=API_KEY) as async_client:
            contextd = ContextdMiddleware(async_client=async_client)
            agent = create_agent(model, middleware=[contextd], checkpointer=InMemorySaver())
            state: dict[str, Any] = await agent.ainvoke(
                {"messages": [HumanMessage(RECALL_PROMPT)]}, config=config
            )
            return state

    if mode == "invoke":
        agent = create_agent(
            model, middleware=[ContextdMiddleware(ctx)], checkpointer=InMemorySaver()
        )
        state = agent.invoke({"messages": [HumanMessage(RECALL_PROMPT)]}, config=config)
    else:
        state = asyncio.run(ainvoke())

    # What the model was told each recall gave: the service's own text, never an error.
    received = {m.tool_call_id: m.content for m in model.received[-1] if isinstance(m, ToolMessage)}
    assert (received["recall-1"], received["recall-2"]) == (cleared.refused, cleared.recalled)
    assert state["messages"][-1].content == failure_answer(cleared.recalled)
    # The calls and their outputs are in the log like any other tool's.
    logged = logged_messages(ctx, session_id)
    assert logged == convert_to_openai_messages(state["messages"])
    assert [
        (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"]))
        for message in logged
        for call in message.get("tool_calls", [])
    ] == [
        ("recall-1", RECALL_TOOL_NAME, {"seq": cleared.output_seq, "pattern": BAD_PATTERN}),
        ("recall-2", RECALL_TOOL_NAME, {"seq": cleared.output_seq}),
    ]
    assert [(m["tool_call_id"], m["content"]) for m in logged if m["role"] == "tool"] == [
        ("recall-1", cleared.refused),
        ("recall-2", cleared.recalled),
    ]
    # The model is bound the tool the service offers beside every assembly (in chat form).
    assert model.bound == ctx.assemble(session_id=session_id, output_format="chat").tools


def test_the_recall_tool_is_offered_unless_sessions_are_made_without_it(
    ctx: ContextdClient,
) -> None:
    without = LinkOptions(session={"recall_tool": False})
    assert [tool.name for tool in ContextdMiddleware(ctx).tools] == [RECALL_TOOL_NAME]
    assert ContextdMiddleware(ctx, options=without).tools == []


def test_run_without_session_id_or_thread_id_is_refused_before_the_model_is_called(
    ctx: ContextdClient,
) -> None:
    model = ScriptedChatModel(messages=iter([AIMessage("never sent")]))
    agent = create_agent(model, middleware=[ContextdMiddleware(ctx)])

    with pytest.raises(ValueError, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("hello")]})

    assert model.received == []


class Note(BaseMessage):
    """A message type of the application's own, which no converter knows."""

    type: str = "note"


def test_unknown_messages_are_kept_in_the_log_and_reported_excluded_without_an_exception(
    ctx: ContextdClient, session_id: str
) -> None:
    critic = ChatMessage(role="critic", content="Check the rounding mode first.", id="critic-1")
    note = Note(content="Budget: two more tool calls.", id="note-1")
    prompt = HumanMessage("Fix the rounding.", id="prompt-1")
    contextd = ContextdMiddleware(
        ctx, session_id=session_id, options=LinkOptions(session={"model": "gpt-4o"})
    )
    model = ScriptedChatModel(messages=iter([AIMessage("Fixed.", id="answer-1")]))
    agent = create_agent(model, system_prompt="Be brief.", middleware=[contextd])

    # A Note is no `AnyMessage`: the point of the test is a message nothing knows.
    state = agent.invoke({"messages": [prompt, critic, cast("AnyMessage", note)]})

    critic_item = {"type": "langchain:chat", "message": critic.model_dump(mode="json")}
    note_item = {"type": "langchain:note", "message": note.model_dump(mode="json")}
    assert logged_messages(ctx, session_id) == [
        {"role": "user", "content": "Fix the rounding."},
        critic_item,
        note_item,
        {"role": "assistant", "content": "Fixed."},
    ]
    assert contextd.link(session_id).excluded == [
        models.ExcludedItem(seq=2, type="langchain:chat", reason="unknown_type"),
        models.ExcludedItem(seq=3, type="langchain:note", reason="unknown_type"),
    ]
    # The model saw the known message only; the agent's state still holds all four.
    assert as_chat(model.received[0]) == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Fix the rounding."}]},
    ]
    assert state["messages"][:3] == [prompt, critic, note]


def test_chat_message_history_round_trips_messages_and_clear_keeps_the_log(
    ctx: ContextdClient, session_id: str
) -> None:
    history = ContextdChatMessageHistory(session_id, client=ctx)
    conversation = [
        HumanMessage("List the files."),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "c1"}]),
        ToolMessage("a.py\nb.py", tool_call_id="c1", name="bash"),
        AIMessage("Two files: a.py and b.py."),
    ]
    assert history.messages == []  # no session yet: an empty history, and none created
    with pytest.raises(NotFound):
        ctx.get_session(session_id)

    history.add_messages(conversation)
    history.add_message(HumanMessage("Thanks."))

    written = [*conversation, HumanMessage("Thanks.")]
    assert as_chat(history.messages) == as_chat(written)

    history.clear()

    assert history.messages == []
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(written)
    history.add_messages([HumanMessage("Start over.")])
    assert as_chat(history.messages) == as_chat([HumanMessage("Start over.")])


def test_chat_message_history_async_methods_round_trip_and_clear(
    ctx: ContextdClient, server: Server, session_id: str
) -> None:
    conversation = [HumanMessage("Which test fails?"), AIMessage("test_rounding.")]

    async def run() -> tuple[list[BaseMessage], list[BaseMessage]]:
        async with AsyncContextdClient(server.base, api_key=API_KEY) as async_client:
            history = ContextdChatMessageHistory(session_id, async_client=async_client)
            await history.aadd_messages(conversation)
            written = await history.aget_messages()
            await history.aclear()
            return written, await history.aget_messages()

    written, cleared = asyncio.run(run())

    assert as_chat(written) == as_chat(conversation)
    assert cleared == []
    assert logged_messages(ctx, session_id) == convert_to_openai_messages(conversation)


def test_example_runs_offline_recalls_what_compaction_left_out_and_writes_its_session(
    ctx: ContextdClient, server: Server
) -> None:
    example = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_loop.py")],
        env={**os.environ, "CONTEXTD_URL": server.base, "CONTEXTD_API_KEY": API_KEY},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert example.returncode == 0, example.stderr
    found = re.search(r"^session (\S+)$", example.stdout, flags=re.MULTILINE)
    assert found is not None, example.stdout
    session_id = found.group(1)
    session = ctx.get_session(session_id)
    logged = logged_messages(ctx, session_id)
    assert [message["role"] for message in logged] == EXAMPLE_ROLES
    assert logged[-1] == {"role": "assistant", "content": EXAMPLE_ANSWER}
    assert "recalled: test_to_milliseconds_rounds failed with assert 344 == 345" in example.stdout
    assert session.compactions >= 1
    assert session.tokenizer.samples == EXAMPLE_ROLES.count("assistant")
    # The recall searched a span holding the first test run's output, and its output is the
    # service's answer to that search.
    (searched,) = [
        call["function"]
        for message in logged
        for call in message.get("tool_calls", [])
        if call["function"]["name"] == RECALL_TOOL_NAME
    ]
    arguments = json.loads(searched["arguments"])
    (recalled,) = [m["content"] for m in logged if m.get("tool_call_id") == "call-6"]
    assert recalled == ctx.recall(session_id, **arguments).tool_output
    (first_run,) = [
        each.seq
        for each in ctx.iter_items(session_id)
        if each.type == "function_call_output" and each.item["call_id"] == "call-1"
    ]
    assert arguments["from_seq"] <= first_run <= arguments["to_seq"]
