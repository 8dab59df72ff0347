"""LangChain v1 adapter: `ContextdMiddleware` hands an agent's model the context contextd
assembles for the session instead of the agent's raw message list, and
`ContextdChatMessageHistory` is a session's active history as a `BaseChatMessageHistory`.

Both build on `contextd_client.runtime` (mirroring, assembly, compaction, usage); this module
only translates between LangChain messages and Chat Completions messages. Install with the
`langchain` extra (`pip install 'contextd-client[langchain]'`).

Invariants:

- **The model sees the assembly, never the raw state.** On every model call the state's
  messages are recorded first, then `request.messages` is replaced by the session-mode assembly
  of that call (compacted first when the service advises it), in `chat` form, converted with
  `convert_to_messages`.
- **The state is the truth.** What is recorded is the agent's state: the list the model node
  is handed before each call (the state, invalid tool calls answered) and the state once more
  when the run ends (`after_agent`), so the final answer is logged too. A model answer is never
  recorded before it is part of the state, because an outer middleware (a retry, human review)
  may still replace or edit it.
- **One leading system message.** The agent's own system prompt comes first, followed by
  contextd's leading developer messages (instructions, rules, the pinned goal, world state) as
  further text blocks of that one system message; developer messages later in the context (the
  restated goal, state updates) reach the model as human messages. One leading system message
  is what every LangChain chat model accepts; several, or one in the middle, some refuse.
- **No message raises.** A message `convert_to_openai_messages` cannot convert, or whose Chat
  role the service does not know, is appended as a Responses item of type
  `langchain:<message type>` holding the message's dump: kept in the log, reported excluded.
- **Usage goes against the assembly the model was given**, from the answer's
  `usage_metadata` (`input_tokens` with cached reads, `cache_read`, `output_tokens`); an answer
  without it reports nothing.
- **One link per session id**, a blocking one for `invoke` and an asyncio one for `ainvoke`.
  Each mirrors on its own; the idempotency keys make their overlap write nothing twice.
- **The agent can read back what the context leaves out.** The middleware's `tools` hold the
  service's recall tool (`context_recall`, the definition the service offers in `tools`) as a
  `StructuredTool`, run against the run's session; its call and output join the state like any
  tool's, so they are mirrored the same way. It is left out when the sessions are created
  without it (`LinkOptions(session={"recall_tool": False})`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import StructuredTool
from langgraph.runtime import Runtime, get_runtime

from contextd_client.client import AsyncContextdClient, ContextdClient
from contextd_client.errors import NotFound
from contextd_client.items import Message
from contextd_client.recall import (
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_NAME,
    recall_tool_parameters,
)
from contextd_client.runtime import AsyncContextLink, ContextLink, Entry, LinkOptions, Usage

__all__ = ["ContextdChatMessageHistory", "ContextdMiddleware", "entries_of"]

DEFAULT_URL = "http://127.0.0.1:8000"
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""The Chat roles the service reads; a message of any other role is kept as an unknown item."""
MAX_ITEM_TYPE = 64
"""The service refuses a longer item `type` (422), which would make an odd message raise."""


def entries_of(messages: Sequence[BaseMessage]) -> list[Entry]:
    """One entry per message: its Chat form, or an unknown Responses item holding its dump."""
    entries: list[Entry] = []
    for message in messages:
        try:
            converted = convert_to_openai_messages(message)
        except (ValueError, TypeError):
            converted = None
        if converted is not None and converted.get("role") in CHAT_ROLES:
            entries.append(Entry(items=(converted,), format="chat"))
        else:
            unknown = {
                "type": f"langchain:{message.type}"[:MAX_ITEM_TYPE],
                "message": message.model_dump(mode="json"),
            }
            entries.append(Entry(items=(unknown,), format="responses"))
    return entries


def _text_blocks(content: str | list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _model_input(
    context: list[Message], *, system_message: SystemMessage | None
) -> tuple[SystemMessage | None, list[AnyMessage]]:
    """The system message and messages the model gets for an assembly in `chat` form."""
    messages = convert_to_messages(context)
    leading = next(
        (n for n, message in enumerate(messages) if not isinstance(message, SystemMessage)),
        len(messages),
    )
    instructions = [block for each in messages[:leading] for block in _text_blocks(each.content)]
    if instructions:
        if system_message is None:
            system_message = SystemMessage(content=instructions)
        else:
            content = [*_text_blocks(system_message.content), *instructions]
            system_message = system_message.model_copy(update={"content": content})
    # convert_to_messages makes only the message classes `AnyMessage` names.
    later = [
        HumanMessage(content=message.content)
        if isinstance(message, SystemMessage)
        else cast("AnyMessage", message)
        for message in messages[leading:]
    ]
    return system_message, later


def _usage_of(response: ModelResponse[Any]) -> Usage | None:
    for message in response.result:
        if isinstance(message, AIMessage) and message.usage_metadata is not None:
            usage = message.usage_metadata
            details = usage.get("input_token_details") or {}
            return Usage(
                input_tokens=usage["input_tokens"],
                cached_tokens=details.get("cache_read", 0),
                output_tokens=usage["output_tokens"],
            )
    return None


class _Clients:
    """The sync and async clients: the ones given, else built (on first use) from `base_url`
    and `api_key`; `close`/`aclose` close only the ones built here."""

    def __init__(
        self,
        client: ContextdClient | None,
        *,
        async_client: AsyncContextdClient | None,
        base_url: str,
        api_key: str | None,
    ) -> None:
        self._given = client
        self._given_async = async_client
        self._base_url = base_url
        self._api_key = api_key
        self._built: ContextdClient | None = None
        self._built_async: AsyncContextdClient | None = None

    @property
    def client(self) -> ContextdClient:
        if self._given is not None:
            return self._given
        if self._built is None:
            self._built = ContextdClient(self._base_url, api_key=self._api_key)
        return self._built

    @property
    def async_client(self) -> AsyncContextdClient:
        if self._given_async is not None:
            return self._given_async
        if self._built_async is None:
            self._built_async = AsyncContextdClient(self._base_url, api_key=self._api_key)
        return self._built_async

    def close(self) -> None:
        if self._built is not None:
            self._built.close()

    async def aclose(self) -> None:
        if self._built_async is not None:
            await self._built_async.aclose()


class ContextdMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Hands the agent's model the session's assembled context on every call.

    The session is `session_id` when given, else the run's `thread_id`
    (`config={"configurable": {"thread_id": ...}}`); a missing session is created with
    `options.session`. `options.output_format` is always `chat`: that is the form LangChain
    converts. List it first in `middleware=[...]` so that it sees the agent's own messages.
    A `SystemMessage` inside the state is logged but not shown (the service keeps system
    messages out of history): give instructions as the agent's `system_prompt`. `tools`
    offers the agent the recall tool (see `recall_tool`).
    """

    def __init__(
        self,
        client: ContextdClient | None = None,
        *,
        async_client: AsyncContextdClient | None = None,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        session_id: str | None = None,
        options: LinkOptions = LinkOptions(),  # noqa: B008 - frozen
    ) -> None:
        super().__init__()
        self.clients = _Clients(
            client, async_client=async_client, base_url=base_url, api_key=api_key
        )
        self.session_id = session_id
        self.options = dataclasses.replace(options, output_format="chat")
        self._links: dict[str, ContextLink] = {}
        self._async_links: dict[str, AsyncContextLink] = {}
        self.tools = [self.recall_tool()] if self.options.session.get("recall_tool", True) else []

    def link(self, session_id: str) -> ContextLink:
        """The blocking link of `session_id` (made on first use)."""
        if session_id not in self._links:
            self._links[session_id] = ContextLink(
                self.clients.client, session_id, options=self.options
            )
        return self._links[session_id]

    def async_link(self, session_id: str) -> AsyncContextLink:
        """The asyncio link of `session_id` (made on first use)."""
        if session_id not in self._async_links:
            self._async_links[session_id] = AsyncContextLink(
                self.clients.async_client, session_id, options=self.options
            )
        return self._async_links[session_id]

    def session_of(self, runtime: Runtime[Any]) -> str:
        """The session a run writes to: `session_id`, else the run's `thread_id`."""
        if self.session_id is not None:
            return self.session_id
        info = runtime.execution_info
        if info is not None and info.thread_id is not None:
            return str(info.thread_id)
        raise ValueError(
            "ContextdMiddleware has no session: give it session_id=..., or run the agent with "
            "config={'configurable': {'thread_id': ...}}"
        )

    def recall_tool(self) -> StructuredTool:
        """The recall tool, reading back from the run's session what the context shows
        shortened or not at all; `tools` holds it. Name, description and parameters are the
        service's; the output is the service's text, or its reason for refusing the
        arguments (never an exception)."""

        def recall(**arguments: Any) -> str:
            return self.link(self._tool_session()).recall(arguments)

        async def arecall(**arguments: Any) -> str:
            return await self.async_link(self._tool_session()).recall(arguments)

        return StructuredTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_TOOL_DESCRIPTION,
            args_schema=recall_tool_parameters(),
            func=recall,
            coroutine=arecall,
        )

    def _tool_session(self) -> str:
        # A tool is handed no `Runtime`: the run's is read from the context of the tool call
        # (which a tool invoked outside a run has not, hence `session_id` first).
        return self.session_id if self.session_id is not None else self.session_of(get_runtime())

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        link = self.link(self.session_of(request.runtime))
        link.record(entries_of(request.messages))
        assembly = link.context()
        system_message, messages = _model_input(
            assembly.messages, system_message=request.system_message
        )
        response = handler(request.override(system_message=system_message, messages=messages))
        usage = _usage_of(response)
        if usage is not None:
            link.report(usage, assembly_id=assembly.assembly_id)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        link = self.async_link(self.session_of(request.runtime))
        await link.record(entries_of(request.messages))
        assembly = await link.context()
        system_message, messages = _model_input(
            assembly.messages, system_message=request.system_message
        )
        response = await handler(request.override(system_message=system_message, messages=messages))
        usage = _usage_of(response)
        if usage is not None:
            await link.report(usage, assembly_id=assembly.assembly_id)
        return response

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        # The last model answer joined the state after the last model call: record it.
        self.link(self.session_of(runtime)).record(entries_of(state["messages"]))

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        await self.async_link(self.session_of(runtime)).record(entries_of(state["messages"]))

    def close(self) -> None:
        """Closes the blocking client this middleware built (not one it was given)."""
        self.clients.close()

    async def aclose(self) -> None:
        """Closes the asyncio client this middleware built (not one it was given)."""
        await self.clients.aclose()


class ContextdChatMessageHistory(BaseChatMessageHistory):
    """A session's active history as LangChain messages.

    `messages` is the active, model-visible history (`GET /sessions/{id}/history` in `chat`
    form: after the latest compaction or reset, without the goal and world state an assembly
    adds); a missing session reads as empty. `add_messages` appends one batch per message,
    creating the session with `options.session` if needed. `clear` resets the session: the
    active history starts empty, the raw log keeps every message.
    """

    def __init__(
        self,
        session_id: str,
        *,
        client: ContextdClient | None = None,
        async_client: AsyncContextdClient | None = None,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        options: LinkOptions = LinkOptions(),  # noqa: B008 - frozen
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self.clients = _Clients(
            client, async_client=async_client, base_url=base_url, api_key=api_key
        )
        self.options = options
        self._link: ContextLink | None = None
        self._async_link: AsyncContextLink | None = None

    @property
    def link(self) -> ContextLink:
        if self._link is None:
            self._link = ContextLink(self.clients.client, self.session_id, options=self.options)
        return self._link

    @property
    def async_link(self) -> AsyncContextLink:
        if self._async_link is None:
            self._async_link = AsyncContextLink(
                self.clients.async_client, self.session_id, options=self.options
            )
        return self._async_link

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a plain attribute there
        try:
            history = self.clients.client.get_history(self.session_id, output_format="chat")
        except NotFound:
            return []
        return convert_to_messages(history.items)

    async def aget_messages(self) -> list[BaseMessage]:
        try:
            history = await self.clients.async_client.get_history(
                self.session_id, output_format="chat"
            )
        except NotFound:
            return []
        return convert_to_messages(history.items)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for entry in entries_of(messages):
            self.link.append(entry)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        for entry in entries_of(messages):
            await self.async_link.append(entry)

    def clear(self) -> None:
        try:
            self.clients.client.reset(self.session_id)
        except NotFound:
            return  # no session, nothing to clear

    async def aclear(self) -> None:
        try:
            await self.clients.async_client.reset(self.session_id)
        except NotFound:
            return

    def close(self) -> None:
        """Closes the blocking client this history built (not one it was given)."""
        self.clients.close()

    async def aclose(self) -> None:
        """Closes the asyncio client this history built (not one it was given)."""
        await self.clients.aclose()
