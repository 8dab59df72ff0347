"""The OpenAI Agents SDK (openai-agents 0.24) on contextd: `ContextdSession` is the SDK's
`Session` over a contextd session, its `call_model_input_filter` hands the model the session's
assembled context instead of the SDK's list, and `ContextdUsageHooks` reports what the model
counted against the assembly it was given.

    session = ContextdSession("demo", base_url="http://127.0.0.1:8000", api_key=KEY)
    agent = Agent(name="engineer", tools=[*my_tools, session.recall_tool()])
    result = await Runner.run(
        agent, "fix the bug", session=session, hooks=ContextdUsageHooks(session),
        run_config=RunConfig(call_model_input_filter=session.call_model_input_filter),
    )
    await session.aclose()

Invariants:

- **The model sees the assembly.** With the filter in place every model call gets exactly the
  session-mode `/assemble` messages in Responses form (goal pinned first and last, world state,
  pairing valid), compacted first when the service advises it (`AsyncContextLink.context`).
- **Every item of the run is in the session before the model is called.** The SDK writes the
  run's input and each turn's items through `add_items` at points of its own: before the first
  call of `Runner.run`, but only after the filter for the first call of `Runner.run_streamed`.
  The filter therefore appends whatever of the model input the session does not hold yet.
- **Nothing is written twice.** What the session holds is judged by `HeldItems` (no I/O): the
  input follows the last list known to be held as a whole (the filter's previous input, or what
  `get_items` returned), and only what comes after that list and was not written since is
  missing. Items the filter wrote ahead of the SDK are dropped from the SDK's later `add_items`.
- **Nothing unknown raises.** An item of a type the service does not know is kept in the log
  and reported in `excluded`; the model never sees it.
- **Usage is reported against the assembly the call used**, by `ContextdUsageHooks` (or
  `report_usage` from hooks of your own).
- **What the context leaves out can be read back.** `recall_tool()` is the service's recall
  tool (`context_recall`, the definition the service offers in `tools`) as the SDK's own
  `FunctionTool`, run against this session; its call and output are run items like any other,
  so they reach the log the same way.

One `ContextdSession` serves one run at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, cast

from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    TResponseInputItem,
)
from agents import Usage as ModelUsage
from agents.memory import SessionSettings
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from contextd_client import models
from contextd_client.client import AsyncContextdClient
from contextd_client.errors import Conflict
from contextd_client.items import Item
from contextd_client.recall import (
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_NAME,
    recall_tool_parameters,
)
from contextd_client.runtime import AsyncContextLink, Entry, LinkOptions, Usage

__all__ = ["ContextdSession", "ContextdUsageHooks"]


def _digest(item: Item) -> str:
    return Entry((item,)).digest


def _as_logged(item: Item) -> Item:
    """`item` as the log takes it: a message the SDK wrote in its short form (a role and content,
    no `type`, as the run's string input becomes) gets `"type": "message"`, as Agents JS writes
    it, so one run logs alike from both SDKs. What the session holds is still judged on the
    SDK's own form (`HeldItems`)."""
    if "type" not in item and "role" in item:
        return {"type": "message", **item}
    return item


@dataclass
class Anchor:
    """A list of items the session holds as a whole, and the digests written after it."""

    digests: list[str] = field(default_factory=list)
    written_after: Counter[str] = field(default_factory=Counter)


@dataclass
class HeldItems:
    """Which items of a model input the session holds, judged without asking the service.

    The SDK's model input is the history it read at the start of the run followed by the run's
    items, and it only grows from one call to the next. So the input starts with one of two
    lists the session holds as a whole: the input of the filter's previous call (`sent`) or
    what `get_items` last returned (`served`); the longer one that matches is the anchor, and of
    what follows it only what was not written since the anchor was taken is missing (counted,
    so a message said twice is two items). An input that starts with neither (the SDK rewrote
    its history) is held against everything `served` and the writes after it hold.

    Items of the run that `pop_item` or `clear_session` hid stay in the SDK's list until the
    run ends; judging by the anchors, they are never written again.
    """

    served: Anchor = field(default_factory=Anchor)
    sent: Anchor = field(default_factory=Anchor)
    ahead: Counter[str] = field(default_factory=Counter)
    """Digests the filter wrote before the SDK's own `add_items` delivered them."""

    def serve(self, items: Sequence[Item]) -> None:
        self.served = Anchor([_digest(item) for item in items])

    def send(self, items: Sequence[Item]) -> None:
        self.sent = Anchor([_digest(item) for item in items])

    def wrote(self, items: Sequence[Item]) -> None:
        digests = [_digest(item) for item in items]
        self.served.written_after.update(digests)
        self.sent.written_after.update(digests)

    def missing(self, items: Sequence[Item]) -> list[Item]:
        digests = [_digest(item) for item in items]
        matching = [
            anchor
            for anchor in (self.sent, self.served)
            if digests[: len(anchor.digests)] == anchor.digests
        ]
        if matching:
            anchor = max(matching, key=lambda each: len(each.digests))
            start, unclaimed = len(anchor.digests), anchor.written_after.copy()
        else:
            start = 0
            unclaimed = Counter(self.served.digests) + self.served.written_after
        missing: list[Item] = []
        for item, digest in zip(items[start:], digests[start:], strict=True):
            if unclaimed[digest] > 0:
                unclaimed[digest] -= 1
            else:
                missing.append(item)
        return missing

    def claim(self, items: Sequence[Item]) -> list[Item]:
        """`items` less those the filter already wrote ahead (each claimed once)."""
        fresh: list[Item] = []
        for item in items:
            digest = _digest(item)
            if self.ahead[digest] > 0:
                self.ahead[digest] -= 1
            else:
                fresh.append(item)
        return fresh


def latest_whole_units(assembly: models.AssembleResponse, limit: int | None) -> list[Item]:
    """The assembly's messages with at most `limit` history items: the latest whole units.

    A unit is never split: a call and all its outputs (items sharing a `call_id`, parallel
    calls included) and a reasoning item with the item right after it (the call it led to)
    are kept or cut together, so the cut may keep fewer than `limit`. What the assembly adds
    beside the history (the goal first and last, world state) is always kept and not counted.
    """
    if limit is None:
        return list(assembly.messages)
    # What the output format could not carry (e.g. another provider's reasoning) has no message.
    excluded = {entry["index"] for entry in assembly.conversion.excluded}
    shown = [item for index, item in enumerate(assembly.items) if index not in excluded]
    pairs = list(zip(shown, assembly.messages, strict=True))
    history = [message for item, message in pairs if item.source == "history"]
    # A cut before index k splits a unit when the unit has items on both sides of it.
    splits: set[int] = set()
    first_of_call: dict[str, int] = {}
    for index, message in enumerate(history):
        call_id = message.get("call_id")
        if isinstance(call_id, str):
            first = first_of_call.setdefault(call_id, index)
            splits.update(range(first + 1, index + 1))
        if message.get("type") == "reasoning" and index + 1 < len(history):
            splits.add(index + 1)
    keep_from = max(0, len(history) - limit)
    while keep_from in splits:
        keep_from += 1
    kept: list[Item] = []
    position = 0
    for item, message in pairs:
        if item.source != "history":
            kept.append(message)
            continue
        if position >= keep_from:
            kept.append(message)
        position += 1
    return kept


class ContextdSession:
    """The SDK's `Session` over contextd session `session_id` (created with
    `options.session` on first use if missing). Close it with `aclose` (or `async with`).

    Items are Responses items both ways, so `options.output_format` must be `responses`.
    """

    def __init__(
        self,
        session_id: str,
        *,
        base_url: str,
        api_key: str | None = None,
        options: LinkOptions = LinkOptions(),  # noqa: B008 - frozen
        session_settings: SessionSettings | None = None,
    ) -> None:
        if options.output_format != "responses":
            raise ValueError("the Agents SDK reads and writes Responses items: output_format")
        self.session_id = session_id
        self.session_settings = session_settings
        self.client = AsyncContextdClient(base_url, api_key=api_key)
        self.link = AsyncContextLink(self.client, session_id, options=options)
        self.held = HeldItems()

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def excluded(self) -> list[models.ExcludedItem]:
        """Items kept in the log but not shown to the model (e.g. of an unknown type)."""
        return self.link.excluded

    async def _append(self, items: Sequence[Item]) -> None:
        # No key of ours: the client makes one per call, so its retries write the batch once.
        await self.link.append(Entry(tuple(map(_as_logged, items))))
        self.held.wrote(items)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's provider-ready history: the session-mode assembly in Responses form,
        goal pinned first and last, pairing valid (not the raw log, which `client.iter_items`
        reads). It never compacts; the filter does, before a model call.

        `limit` keeps the latest whole units totalling at most `limit` history items: a call
        with all its outputs, and a reasoning item with the item right after it, are never
        split (so fewer may come back). The goal and world state messages are always included
        and not counted.
        """
        await self.link.ensure_session()
        assembly = await self.client.assemble(**self.link.options.assemble_body(self.session_id))
        items = latest_whole_units(assembly, limit)
        self.held.serve(items)
        return cast(list[TResponseInputItem], items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends `items` as one atomic batch (less those the filter already wrote). An item
        of a type the service does not know is kept in the log and lands in `excluded`."""
        fresh = self.held.claim(cast(list[Item], items))
        if fresh:
            await self._append(fresh)

    async def pop_item(self) -> TResponseInputItem | None:
        """Hides the newest item the active history shows and returns it as logged; None when
        the active history shows none. Pairing holds: popping an output hides its call (and the
        call's other outputs) too, popping a call hides its outputs. The raw log keeps all."""
        await self.link.ensure_session()
        try:
            answer = await self.client.retract(self.session_id)
        except Conflict as refused:
            if refused.code == "nothing_to_retract":
                return None
            raise
        # The answer lists what it hid in seq order; the newest is the one asked for.
        return cast(TResponseInputItem, answer.items[-1].item)

    async def clear_session(self) -> None:
        """Starts the active history empty; the goal, world state and raw log stay."""
        await self.link.ensure_session()
        await self.client.reset(self.session_id)

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """For `RunConfig(call_model_input_filter=...)`: appends the items of the model input
        the session lacks (see `HeldItems`), then replaces the input with the session-mode
        assembly (compacting first when advised). The agent's instructions stay as they are."""
        items = cast(list[Item], data.model_data.input)
        missing = self.held.missing(items)
        if missing:
            await self._append(missing)
            self.held.ahead.update(_digest(item) for item in missing)
        self.held.send(items)
        assembly = await self.link.context()
        return ModelInputData(
            input=cast(list[TResponseInputItem], assembly.messages),
            instructions=data.model_data.instructions,
        )

    def recall_tool(self) -> FunctionTool:
        """The recall tool for the agent's `tools=`, reading back from this session what the
        context shows shortened or not at all. Name, description and parameters are the
        service's; the output is the service's text, or its reason for refusing the
        arguments (never an exception)."""

        async def recall(context: ToolContext[Any], arguments: str) -> str:
            return await self.link.recall(arguments)

        return FunctionTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_TOOL_DESCRIPTION,
            params_json_schema=recall_tool_parameters(),
            on_invoke_tool=recall,
            strict_json_schema=False,
        )

    async def report_usage(self, usage: ModelUsage) -> None:
        """Reports one model call's usage against the filter's assembly for that call (with
        no assembly when the filter is not in use)."""
        await self.link.report(
            Usage(
                input_tokens=usage.input_tokens,
                cached_tokens=usage.input_tokens_details.cached_tokens,
                output_tokens=usage.output_tokens,
            )
        )


class ContextdUsageHooks(RunHooks[Any]):
    """Run hooks reporting each model call's usage to `session`. With hooks of your own, call
    `session.report_usage(response.usage)` from their `on_llm_end` instead."""

    def __init__(self, session: ContextdSession) -> None:
        self.session = session

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await self.session.report_usage(response.usage)
