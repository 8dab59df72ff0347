"""Pydantic AI adapter: a capability that mirrors an agent run's messages into a contextd session
and sends the model the session's assembled context instead of the run's raw message list.
Install with the `pydantic-ai` extra (`pip install 'contextd-client[pydantic-ai]'`).

    from pydantic_ai import Agent
    from contextd_client.pydantic_ai import ContextdHistory

    async with ContextdHistory("demo", base_url="http://127.0.0.1:8000") as history:
        agent = Agent("openai:gpt-4o", capabilities=[history])
        result = await agent.run("list the files")

(`with ContextdHistory(...)` and `agent.run_sync` work the same way from blocking code.)

Pydantic AI 2 has no `history_processors=` argument: a history processor is wrapped in the
`ProcessHistory` capability, which writes what the processor returns back into the run's
history. That is the wrong shape here: the next call would find the assembled view where the
conversation was and mirror it as new conversation. `ContextdHistory` is a capability hooking
the same `before_model_request`, and changes only the request being sent.

Invariants:

- **The run's history stays the framework's.** Only `request_context.messages` (what this one
  request sends) is replaced, never `ctx.messages`: `result.all_messages()` is the conversation
  as it happened, and it is what the session mirrors, through `AsyncContextLink.record`
  (appended once, in order, before the assembly of the call that follows; the final answer when
  the run ends). A conversation continued with `message_history=` appends only what is new,
  whether this instance or a new one serves it.
- **One entry per message.** A `ModelRequest` or `ModelResponse` becomes one Chat Completions
  entry: user prompt → user, tool return → tool (a retried call is answered by its tool message,
  other retry feedback is a user message), a system prompt later in the conversation (one
  enqueued mid-run) → developer, text and tool calls → one assistant message with `tool_calls`.
  A part with no chat form (thinking, files, native tool parts, anything unknown) is still kept:
  it goes in the same entry as `{"type": "pydantic_ai:<part_kind>", "part": <its JSON>}`, which
  the service keeps in the log and reports excluded. Nothing raises.
- **The agent's own instructions travel beside the assembly, as Pydantic AI sends them.** Its
  `instructions` go with every request anyway; its system prompt (the system prompt parts of the
  conversation's first message) is sent first in every request, ahead of the assembly, and is
  not mirrored: the service keeps system messages out of the history, and a dynamic system
  prompt is rewritten in place by every run.
- **The model gets the assembly.** Session-mode `/assemble` in chat form (compacting first, once,
  when the service advises it), translated back: consecutive non-assistant messages form one
  `ModelRequest`, each assistant message a `ModelResponse`, a tool message a `ToolReturnPart`
  named after the call it answers. Pydantic AI sends only a list ending in a request; the
  assembly ends with the one being answered (or the restated goal after it), and when none of
  that request's parts has a chat form, the framework's own request closes the list.
- **Usage is reported per call,** as soon as the model answers, against the assembly that call
  was sent.
- **The agent can read back what the context leaves out.** The capability's toolset holds the
  service's recall tool (`context_recall`, the definition the service offers in `tools`) as a
  `Tool`, run against the session; its call and return are parts of the run like any tool's,
  so they are mirrored the same way. It is left out when the session is created without it
  (`LinkOptions(session={"recall_tool": False})`).

One `ContextdHistory` is one session; its runs go one after another (the mirror of the run's
list is shared by the runs it serves, which is what lets a continued conversation append only
what is new).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import pydantic_core
from pydantic_ai import AgentRunResult, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.toolsets import FunctionToolset

from contextd_client.client import AsyncContextdClient
from contextd_client.items import Item, Message
from contextd_client.recall import (
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_NAME,
    recall_tool_parameters,
)
from contextd_client.runtime import AsyncContextLink, Entry, LinkOptions, Usage

__all__ = ["ContextdHistory", "entries_from_messages", "messages_from_chat", "system_prompt_of"]

UNKNOWN_PREFIX = "pydantic_ai:"
"""Starts the type of an item keeping a part that has no chat form."""


def _unknown(part: object) -> Item:
    kind = getattr(part, "part_kind", type(part).__name__)
    # Files travel as base64, so that every part dumps to JSON.
    return {
        "type": f"{UNKNOWN_PREFIX}{kind}",
        "part": pydantic_core.to_jsonable_python(part, bytes_mode="base64"),
    }


def _request_items(part: ModelRequestPart) -> list[Item]:
    match part:
        case SystemPromptPart():
            return [{"role": "developer", "content": part.content}]
        case UserPromptPart(content=str() as text):
            return [{"role": "user", "content": text}]
        case UserPromptPart() if all(isinstance(each, str) for each in part.content):
            texts = [{"type": "text", "text": each} for each in part.content]
            return [{"role": "user", "content": texts}]
        case ToolReturnPart():
            answer: Item = {
                "role": "tool",
                "tool_call_id": part.tool_call_id,
                "content": part.model_response_str(),
            }
            # A tool message holds text: the files a tool returned are kept beside it.
            return [answer, _unknown(part)] if part.files else [answer]
        case RetryFeedbackPart():
            return [{"role": "user", "content": part.model_response()}]
        case RetryPromptPart(tool_name=None):  # deprecated; a history built by hand may hold one
            return [{"role": "user", "content": part.model_response()}]
        case RetryPromptPart():
            feedback = part.model_response()
            return [{"role": "tool", "tool_call_id": part.tool_call_id, "content": feedback}]
        case _:
            return [_unknown(part)]


def _response_items(parts: Sequence[ModelResponsePart]) -> list[Item]:
    """One assistant message for the text and the calls, where the first of them stands; the
    other parts around it, in their order."""
    items: list[Item] = []
    texts: list[str] = []
    calls: list[Item] = []
    assistant: Item = {"role": "assistant"}
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ToolCallPart):
            function = {"name": part.tool_name, "arguments": part.args_as_json_str()}
            calls.append({"id": part.tool_call_id, "type": "function", "function": function})
        else:
            items.append(_unknown(part))
            continue
        if not any(each is assistant for each in items):
            items.append(assistant)
    if len(texts) == 1:
        assistant["content"] = texts[0]
    else:
        assistant["content"] = [{"type": "text", "text": text} for text in texts] or None
    if calls:
        assistant["tool_calls"] = calls
    return items


def entries_from_messages(messages: Sequence[ModelMessage]) -> list[Entry]:
    """A run's messages as chat-form entries, one per message (see the module's invariants)."""
    entries: list[Entry] = []
    for position, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            items = _response_items(message.parts)
        else:
            parts = message.parts
            if position == 0:
                parts = [part for part in parts if not isinstance(part, SystemPromptPart)]
            items = [item for part in parts for item in _request_items(part)]
        entries.append(Entry(tuple(items), format="chat"))
    return entries


def system_prompt_of(messages: Sequence[ModelMessage]) -> list[SystemPromptPart]:
    """The agent's system prompt: the system prompt parts of the conversation's first message."""
    if not messages or not isinstance(messages[0], ModelRequest):
        return []
    return [part for part in messages[0].parts if isinstance(part, SystemPromptPart)]


def _text(content: str | list[Item] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(part.get("text") or part.get("refusal") or "" for part in content)


def _user_content(part: Item) -> UserContent:
    match part:
        case {"type": "text", "text": str() as text}:
            return text
        case {"type": "image_url", "image_url": {"url": str() as url}} if url.startswith("data:"):
            return BinaryContent.from_data_uri(url)
        case {"type": "image_url", "image_url": {"url": str() as url}}:
            return ImageUrl(url=url)
        case _:
            raise ValueError(f"a chat user content part with no Pydantic AI form: {part!r}")


def messages_from_chat(messages: Sequence[Message]) -> list[ModelMessage]:
    """An assembly's chat messages as Pydantic AI messages (see the module's invariants)."""
    translated: list[ModelMessage] = []
    request: list[ModelRequestPart] = []
    tool_names: dict[str, str] = {}
    for message in messages:
        content: Any = message.get("content")
        match message["role"]:
            case "assistant":
                if request:
                    translated.append(ModelRequest(parts=request))
                    request = []
                parts: list[ModelResponsePart] = (
                    [TextPart(content)]
                    if isinstance(content, str) and content
                    else [TextPart(_text([each])) for each in content or []]
                )
                for call in message.get("tool_calls") or []:
                    name, arguments = call["function"]["name"], call["function"]["arguments"]
                    tool_names[call["id"]] = name
                    parts.append(ToolCallPart(name, arguments, tool_call_id=call["id"]))
                translated.append(ModelResponse(parts=parts))
            case "tool":
                call_id = message["tool_call_id"]
                request.append(ToolReturnPart(tool_names[call_id], _text(content), call_id))
            case "user":
                prompt = content if isinstance(content, str) else list(map(_user_content, content))
                request.append(UserPromptPart(prompt))
            case _:  # system and developer: instructions, the goal, world state
                request.append(SystemPromptPart(_text(content)))
    if request:
        translated.append(ModelRequest(parts=request))
    return translated


class ContextdHistory(AbstractCapability[Any]):
    """Puts a contextd session between a Pydantic AI agent and its model:
    `Agent(..., capabilities=[ContextdHistory(session_id, base_url=...)])`.

    `options` says how to assemble and compact (unit, phase, strategy, and the attributes a
    missing session is created with); the assembly is read in chat form whatever its
    `output_format` says. `link` holds what happened: `last_assembly`, `compactions`,
    `excluded`. The capability gives the agent the recall tool (see `recall_tool`).
    """

    def __init__(
        self,
        session_id: str,
        *,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        options: LinkOptions = LinkOptions(),  # noqa: B008 - frozen
    ) -> None:
        self.link = AsyncContextLink(
            AsyncContextdClient(base_url, api_key=api_key),
            session_id,
            options=dataclasses.replace(options, output_format="chat"),
        )

    def recall_tool(self) -> Tool[Any]:
        """The recall tool, reading back from the session what the context shows shortened or
        not at all; the capability's toolset holds it. Name, description and parameters are
        the service's; the output is the service's text, or its reason for refusing the
        arguments (never an exception)."""

        async def recall(**arguments: Any) -> str:
            return await self.link.recall(arguments)

        return Tool.from_schema(
            recall, RECALL_TOOL_NAME, RECALL_TOOL_DESCRIPTION, recall_tool_parameters()
        )

    def get_toolset(self) -> FunctionToolset[Any] | None:
        if not self.link.options.session.get("recall_tool", True):
            return None
        return FunctionToolset([self.recall_tool()])

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self.link.record(entries_from_messages(ctx.messages))
        assembly = await self.link.context()
        messages = messages_from_chat(assembly.messages)
        answered = ctx.messages[-1]
        if isinstance(answered, ModelRequest) and not (
            messages and isinstance(messages[-1], ModelRequest)
        ):
            # None of its parts has a chat form, but for the system prompt, which comes below.
            kept = [part for part in answered.parts if not isinstance(part, SystemPromptPart)]
            messages.append(dataclasses.replace(answered, parts=kept))
        if system_prompt := system_prompt_of(ctx.messages):
            first = messages[0]
            if isinstance(first, ModelRequest):
                messages[0] = dataclasses.replace(first, parts=[*system_prompt, *first.parts])
            else:
                messages.insert(0, ModelRequest(parts=system_prompt))
        request_context.messages = messages
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        usage = response.usage
        await self.link.report(
            Usage(usage.input_tokens, usage.cache_read_tokens, usage.output_tokens)
        )
        return response

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        # No later call of this run sends the final answer: mirror it now, so that the session
        # holds the whole run.
        await self.link.record(entries_from_messages(result.all_messages()))
        return result

    async def aclose(self) -> None:
        await self.link.client.aclose()

    def close(self) -> None:
        """`aclose` for blocking code that runs the agent with `run_sync`: the client's
        connections live on the event loop those runs used, the thread's current one."""
        asyncio.get_event_loop().run_until_complete(self.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
