"""What every framework adapter does around one model call, written once: mirror the
framework's messages into the session's fact log, hand the model the assembled context instead
of the raw list (compacting first when the service advises it), and report the provider's usage
against the assembly the model was given.

Invariants:

- **An entry is appended once.** An entry is one framework message (or item) translated into
  provider items. Its idempotency key is derived from the session, its position in the
  framework's list and a digest of its items, so sending it again — a retry, a second process
  mirroring the same thread, a restart that forgot what was sent — is answered with the
  original seqs and writes nothing.
- **In order, before the assembly.** Entries are appended in list order, each as its own
  atomic batch, and all of them before the assembly of the call that follows, so the model
  always sees every message the framework holds.
- **Nothing unknown raises.** An item of a type the service does not know is kept in the log
  and comes back in the append's `excluded`; it is collected in `excluded` and logged.
- **One compaction per call at most.** When the assembly advises compaction, the session is
  compacted and assembled once more; the second assembly is what the model gets.
- **A recall answers the model, whatever it asked.** `recall` runs the model's call of the
  recall tool against the session and returns the tool's output: the service's text, or its
  reason for refusing the arguments (see `contextd_client.recall`). It writes nothing: the
  call and its output are framework messages, mirrored like any other.

`ContextLink` waits by blocking, `AsyncContextLink` on the event loop; what they decide is
`Mirror`'s, which does no I/O.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

from contextd_client import models
from contextd_client import params as p
from contextd_client.client import AsyncContextdClient, ContextdClient
from contextd_client.errors import ContextdError, NotFound
from contextd_client.items import Item
from contextd_client.recall import InvalidArguments, is_refusal, recall_request, refusal_output

logger = logging.getLogger("contextd_client")

Format: TypeAlias = Literal["responses", "chat", "anthropic"]
Strategy: TypeAlias = Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"]


@dataclass(frozen=True)
class Entry:
    """One framework message as provider items in `format`: appended as one batch."""

    items: tuple[Item, ...]
    format: Format = "responses"

    @property
    def digest(self) -> str:
        """A digest of what the entry says, independent of key order in its dicts."""
        canonical = json.dumps(
            [self.format, self.items], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Usage:
    """What the provider reported for one model call."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class PendingEntry:
    position: int
    entry: Entry
    idempotency_key: str


def idempotency_key(session_id: str, position: int, digest: str) -> str:
    """The append key of the entry at `position` with `digest`: the same entry always gets the
    same key, and a key never names two different entries."""
    return "mirror-" + hashlib.sha256(f"{session_id}\0{position}\0{digest}".encode()).hexdigest()


@dataclass
class Mirror:
    """Which entries of a framework's list the session already holds: the longest prefix that
    was appended (by digest). Everything after it is pending, even when an earlier entry was
    rewritten by another component — the log is append-only, so the rewrite is new content."""

    session_id: str
    appended: list[str] = field(default_factory=list)

    def pending(self, entries: Sequence[Entry]) -> list[PendingEntry]:
        digests = [entry.digest for entry in entries]
        common = 0
        for mine, theirs in zip(self.appended, digests, strict=False):
            if mine != theirs:
                break
            common += 1
        self.appended = self.appended[:common]
        return [
            PendingEntry(position, entries[position], idempotency_key(self.session_id, position, d))
            for position, d in enumerate(digests[common:], start=common)
        ]

    def mark(self, pending: PendingEntry) -> None:
        assert pending.position == len(self.appended), "entries are appended in order"
        self.appended.append(pending.entry.digest)


@dataclass(frozen=True)
class LinkOptions:
    """How a link assembles and compacts; the same for the sync and async links.

    `session` holds the attributes a missing session is created with (`model`,
    `context_window`, `encoding`, `metadata`, `hooks`). `compact_strategy` None follows the
    service's `recommended_strategy`; `compact=False` never compacts (the advice still comes
    back in `last_assembly`).
    """

    output_format: Format = "responses"
    unit: str | None = None
    phase: str | None = None
    compact: bool = True
    compact_strategy: Strategy | None = None
    session: p.CreateSessionRequest = field(default_factory=lambda: p.CreateSessionRequest())

    def create_body(self, session_id: str) -> p.CreateSessionRequest:
        body: p.CreateSessionRequest = {**self.session, "session_id": session_id}
        return body

    def append_body(self, entry: Entry, idempotency_key: str | None) -> p.AppendRequest:
        body: p.AppendRequest = {"items": list(entry.items), "format": entry.format}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if self.unit is not None:
            body["unit"] = self.unit
        if self.phase is not None:
            body["phase"] = self.phase
        return body

    def assemble_body(self, session_id: str) -> p.AssembleRequest:
        body: p.AssembleRequest = {"session_id": session_id, "output_format": self.output_format}
        if self.unit is not None:
            body["unit"] = self.unit
        if self.phase is not None:
            body["phase"] = self.phase
        return body

    def compact_body(self, session_id: str, advice: models.AdviceBody) -> p.CompactRequest:
        """The compaction to post when advised: the configured strategy, falling back to the
        one the service recommends when the configured one cannot apply (posted again on every
        step, a no-op would leave the pressure where it is)."""
        strategy = self.compact_strategy or advice.recommended_strategy or "summary"
        return {"session_id": session_id, "strategy": cast(Strategy, strategy), "fallback": True}

    def usage_body(self, usage: Usage, assembly_id: str | None) -> p.UsageRequest:
        body: p.UsageRequest = {
            "input_tokens": usage.input_tokens,
            "cached_tokens": usage.cached_tokens,
            "output_tokens": usage.output_tokens,
            "assembly_id": assembly_id,
        }
        if self.unit is not None:
            body["unit"] = self.unit
        if self.phase is not None:
            body["phase"] = self.phase
        return body


def _note_excluded(session_id: str, answer: models.AppendResponse) -> list[models.ExcludedItem]:
    for excluded in answer.excluded:
        logger.info(
            "contextd session %s: seq %s (%s) kept in the log, not shown to the model: %s",
            session_id,
            excluded.seq,
            excluded.type,
            excluded.reason,
        )
    return list(answer.excluded)


class ContextLink:
    """One session seen from a blocking framework: `record` the framework's whole list before a
    model call, send `context()`'s messages, then `report` the model's usage."""

    def __init__(
        self,
        client: ContextdClient,
        session_id: str,
        *,
        options: LinkOptions = LinkOptions(),
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.options = options
        self.mirror = Mirror(session_id)
        self.excluded: list[models.ExcludedItem] = []
        self.compactions: list[models.CompactResponse] = []
        self.last_assembly: models.AssembleResponse | None = None
        self._session_known = False

    def ensure_session(self) -> None:
        """Creates the session with `options.session` unless it exists."""
        if self._session_known:
            return
        try:
            self.client.get_session(self.session_id)
        except NotFound:
            self.client.create_session(**self.options.create_body(self.session_id))
        self._session_known = True

    def append(self, entry: Entry, *, idempotency_key: str | None = None) -> models.AppendResponse:
        """Appends one entry as it is (outside the mirrored list, e.g. `add_items`)."""
        self.ensure_session()
        answer = self.client.append_items(
            self.session_id, **self.options.append_body(entry, idempotency_key)
        )
        self.excluded.extend(_note_excluded(self.session_id, answer))
        return answer

    def record(self, entries: Sequence[Entry]) -> int:
        """Appends the entries of the framework's list the session does not hold yet; returns
        how many were sent."""
        pending = self.mirror.pending(entries)
        for each in pending:
            if each.entry.items:
                self.append(each.entry, idempotency_key=each.idempotency_key)
            self.mirror.mark(each)
        return len(pending)

    def context(self) -> models.AssembleResponse:
        """The session-mode assembly to send; compacts first (once) when advised, and
        assembles again when the compaction applied (the service then takes the assembly that
        advised it as never sent)."""
        self.ensure_session()
        body = self.options.assemble_body(self.session_id)
        assembly = self.client.assemble(**body)
        if self.options.compact and assembly.advice.should_compact:
            compaction = self.client.compact(
                **self.options.compact_body(self.session_id, assembly.advice)
            )
            self.compactions.append(compaction)
            if compaction.applied:  # else the context already made is the one to send
                assembly = self.client.assemble(**body)
        self.last_assembly = assembly
        return assembly

    def report(self, usage: Usage, *, assembly_id: str | None = None) -> None:
        """Reports one model call's usage, against the last assembly unless told another."""
        if assembly_id is None and self.last_assembly is not None:
            assembly_id = self.last_assembly.assembly_id
        self.client.report_usage(self.session_id, **self.options.usage_body(usage, assembly_id))

    def recall(self, arguments: str | Mapping[str, Any]) -> str:
        """The output of the model's recall call with `arguments` (JSON text or parsed): the
        service's `tool_output`, or why it refused them. Raises only when the service could
        not answer (5xx, unreachable), as every other call of the link does."""
        try:
            answer = self.client.recall(self.session_id, **recall_request(arguments))
        except InvalidArguments as invalid:
            return str(invalid)
        except ContextdError as error:
            if not is_refusal(error):
                raise
            return refusal_output(error)
        return answer.tool_output


class AsyncContextLink:
    """`ContextLink` for asyncio frameworks: the same calls, awaited."""

    def __init__(
        self,
        client: AsyncContextdClient,
        session_id: str,
        *,
        options: LinkOptions = LinkOptions(),
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.options = options
        self.mirror = Mirror(session_id)
        self.excluded: list[models.ExcludedItem] = []
        self.compactions: list[models.CompactResponse] = []
        self.last_assembly: models.AssembleResponse | None = None
        self._session_known = False

    async def ensure_session(self) -> None:
        """Creates the session with `options.session` unless it exists."""
        if self._session_known:
            return
        try:
            await self.client.get_session(self.session_id)
        except NotFound:
            await self.client.create_session(**self.options.create_body(self.session_id))
        self._session_known = True

    async def append(
        self, entry: Entry, *, idempotency_key: str | None = None
    ) -> models.AppendResponse:
        """Appends one entry as it is (outside the mirrored list, e.g. `add_items`)."""
        await self.ensure_session()
        answer = await self.client.append_items(
            self.session_id, **self.options.append_body(entry, idempotency_key)
        )
        self.excluded.extend(_note_excluded(self.session_id, answer))
        return answer

    async def record(self, entries: Sequence[Entry]) -> int:
        """Appends the entries of the framework's list the session does not hold yet; returns
        how many were sent."""
        pending = self.mirror.pending(entries)
        for each in pending:
            if each.entry.items:
                await self.append(each.entry, idempotency_key=each.idempotency_key)
            self.mirror.mark(each)
        return len(pending)

    async def context(self) -> models.AssembleResponse:
        """The session-mode assembly to send; compacts first (once) when advised, and
        assembles again when the compaction applied (the service then takes the assembly that
        advised it as never sent)."""
        await self.ensure_session()
        body = self.options.assemble_body(self.session_id)
        assembly = await self.client.assemble(**body)
        if self.options.compact and assembly.advice.should_compact:
            compaction = await self.client.compact(
                **self.options.compact_body(self.session_id, assembly.advice)
            )
            self.compactions.append(compaction)
            if compaction.applied:  # else the context already made is the one to send
                assembly = await self.client.assemble(**body)
        self.last_assembly = assembly
        return assembly

    async def report(self, usage: Usage, *, assembly_id: str | None = None) -> None:
        """Reports one model call's usage, against the last assembly unless told another."""
        if assembly_id is None and self.last_assembly is not None:
            assembly_id = self.last_assembly.assembly_id
        await self.client.report_usage(
            self.session_id, **self.options.usage_body(usage, assembly_id)
        )

    async def recall(self, arguments: str | Mapping[str, Any]) -> str:
        """The output of the model's recall call with `arguments` (JSON text or parsed): the
        service's `tool_output`, or why it refused them. Raises only when the service could
        not answer (5xx, unreachable), as every other call of the link does."""
        try:
            answer = await self.client.recall(self.session_id, **recall_request(arguments))
        except InvalidArguments as invalid:
            return str(invalid)
        except ContextdError as error:
            if not is_refusal(error):
                raise
            return refusal_output(error)
        return answer.tool_output
