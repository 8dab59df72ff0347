"""The fact vocabulary: how each kind of fact is written to a session's log, and how the log is
folded into the session's active history.

A session's log holds client items (in Responses form) and the service's own facts, whose
types start with `contextd.`: goal versions, world-state snapshots (the full snapshot first, an
RFC 7386 merge patch after), compactions and links to child sessions. Invariants:

- Clients never write `contextd.*` facts (`client_items` refuses them); every builder here
  marks its facts harness-authored.
- A fact's `tokens` is `count(visible_text(item))` in the session's encoding for model-visible
  items, the compacted history's tokens for a compaction, and 0 for bookkeeping.
- The fold is a pure function of the facts in seq order, and incremental: folding facts
  `a..c` onto the fold of `..a` equals folding `..c` from scratch. A fold is never mutated once
  built, so folds can be shared between requests.
- Internal facts never appear among the active history's items: goal versions, world-state
  facts and compactions are folded into `goal`, `world_state` and `compactions`; child links
  and other bookkeeping are skipped. A compaction replaces the visible items with its own
  `history`, whose entries name a kept fact by seq (verbatim) or carry an item it wrote.
- A fork starts from its parent's active history as of the fork point, without the parent's
  world-state fragments and with only the sections it declared inherited.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, Protocol

from app.domain.compaction import CompactionResult
from app.domain.errors import (
    AlreadyRetracted,
    InvalidInput,
    NothingToRetract,
    NotInActiveHistory,
)
from app.domain.formats import to_responses
from app.domain.history import HistoryEntry
from app.domain.items import (
    CALL_TYPES,
    INTERNAL_TYPE_PREFIX,
    MAX_TYPE_LENGTH,
    OUTPUT_TYPES,
    CountTokens,
    Format,
    Item,
    item_type,
    visible_text,
)
from app.domain.json_encoding import encode_json
from app.domain.world_state import (
    Goal,
    WorldState,
    WorldStateUpdate,
    apply_patch,
    diff_world_state,
    is_state_fragment,
)

__all__ = [
    "CHILD_FACT",
    "COMPACTION_FACT",
    "EMPTY_FOLD",
    "GOAL_FACT",
    "RESET_FACT",
    "RETRACTION_FACT",
    "WORLD_STATE_FACT",
    "ActiveHistory",
    "ChildKind",
    "Fold",
    "LoggedFact",
    "NewFact",
    "Retraction",
    "child_link_fact",
    "client_batch",
    "client_items",
    "compaction_fact",
    "conclusion_fact",
    "conclusion_item",
    "delegate_brief",
    "fact_text",
    "fold_facts",
    "fork_fold",
    "goal_fact",
    "item_fact",
    "plan_retraction",
    "reset_fact",
    "world_state_facts",
]

RETRACTION_FACT = f"{INTERNAL_TYPE_PREFIX}retraction"
RESET_FACT = f"{INTERNAL_TYPE_PREFIX}reset"
GOAL_FACT = f"{INTERNAL_TYPE_PREFIX}goal"
WORLD_STATE_FACT = f"{INTERNAL_TYPE_PREFIX}world_state"
COMPACTION_FACT = f"{INTERNAL_TYPE_PREFIX}compaction"
CHILD_FACT = f"{INTERNAL_TYPE_PREFIX}child"

ChildKind = Literal["delegate", "fork"]

HARNESS: Mapping[str, Any] = {"harness_authored": True}


@dataclass(frozen=True)
class NewFact:
    """One fact to append: its type, the item as stored, its tokens and its provenance."""

    type: str
    item: dict[str, Any]
    tokens: int
    provenance: dict[str, Any]
    original: dict[str, Any] | None = None
    """For an item sent in another format: see `client_batch`."""


# Writing.


def client_batch(
    items: list[dict[str, Any]], fmt: Format, *, field: str
) -> tuple[list[Item], list[dict[str, Any] | None]]:
    """Client items in Responses form, each with what the log keeps of its original form.

    A message of Chat or Anthropic may become several items. The first keeps the message
    exactly as sent, `{"format", "message", "parts"}` (`parts`: how many items it became); the
    others name their place in it, `{"format", "part"}`, so each message is stored once. Items
    sent in Responses form are their own original (None). `contextd.*` types are the service's
    own and refused.
    """
    parsed = to_responses(items, fmt)
    unstorable = [
        source
        for item, source in zip(parsed.items, parsed.sources, strict=True)
        if len(kind := item_type(item)) > MAX_TYPE_LENGTH or "\x00" in kind
    ]
    if unstorable:
        raise InvalidInput(
            f"an item type is at most {MAX_TYPE_LENGTH} characters, without a NUL character",
            details=[
                {"loc": ["body", field, i, "type"], "msg": "type cannot be stored"}
                for i in sorted(set(unstorable))
            ],
        )
    reserved = [
        i for i, item in enumerate(parsed.items) if item_type(item).startswith(INTERNAL_TYPE_PREFIX)
    ]
    if reserved:
        raise InvalidInput(
            f"item types starting with {INTERNAL_TYPE_PREFIX!r} are written by the service only",
            details=[{"loc": ["body", field, i, "type"], "msg": "reserved type"} for i in reserved],
        )
    if fmt == "responses":
        return parsed.items, [None] * len(parsed.items)
    parts = Counter(parsed.sources)
    first: dict[int, int] = {}
    originals: list[dict[str, Any] | None] = []
    for position, source in enumerate(parsed.sources):
        part = position - first.setdefault(source, position)
        if part == 0:
            originals.append({"format": fmt, "message": items[source], "parts": parts[source]})
        else:
            originals.append({"format": fmt, "part": part})
    return parsed.items, originals


def client_items(items: list[dict[str, Any]], fmt: Format, *, field: str) -> list[Item]:
    """Client items in Responses form (see `client_batch`)."""
    return client_batch(items, fmt, field=field)[0]


@dataclass(frozen=True)
class Retraction:
    """A retraction to append, and the items it hides as the log holds them."""

    fact: NewFact
    hidden: tuple[tuple[int, Item], ...]
    """(seq, item) of every hidden item, in seq order."""


def plan_retraction(active: ActiveHistory, seq: int | None) -> Retraction:
    """Hides item `seq` of the active history (the newest one it shows when `seq` is None, as a
    framework's `pop_item` asks), with what it is paired with: retracting a call retracts its
    outputs, retracting an output retracts its call (and the call's other outputs), so the
    history stays one a provider accepts. The fact lists every seq it hides.

    Every refusal is a conflict with the session's state (the session itself was found): no
    seq in an active history that shows no logged item (`NothingToRetract`), a seq already
    retracted, or one the active history does not show, past the log included.
    """
    position = {s: i for i, s in enumerate(active.seqs) if s is not None}
    if seq is None:
        if not position:
            raise NothingToRetract("the active history shows no logged item to retract")
        seq = max(position)
    if not 1 <= seq <= active.last_seq:
        raise NotInActiveHistory(f"session has no seq {seq} (its last is {active.last_seq})")
    if seq in active.retracted:
        raise AlreadyRetracted(f"seq {seq} is already retracted", details={"seq": seq})
    if seq not in position:
        raise NotInActiveHistory(
            f"seq {seq} is not in the active history (compacted away, reset, or not an item "
            "the model sees)",
            details={"seq": seq},
        )
    item = active.items[position[seq]]
    call_id = item.get("call_id")
    hidden = {seq}
    if isinstance(call_id, str) and (
        item_type(item) in CALL_TYPES or item_type(item) in OUTPUT_TYPES
    ):
        hidden |= {
            s
            for s, other in zip(active.seqs, active.items, strict=True)
            if s is not None
            and other.get("call_id") == call_id
            and item_type(other) in CALL_TYPES | OUTPUT_TYPES
        }
    record = {"type": RETRACTION_FACT, "seqs": sorted(hidden), "requested": seq}
    return Retraction(
        fact=NewFact(RETRACTION_FACT, record, 0, dict(HARNESS)),
        hidden=tuple((s, active.items[position[s]]) for s in sorted(hidden)),
    )


def reset_fact() -> NewFact:
    """After it, the active history starts empty; the log keeps everything, and the goal and
    world state stay the session's."""
    return NewFact(RESET_FACT, {"type": RESET_FACT}, 0, dict(HARNESS))


def conclusion_item(conclusion: dict[str, Any], fmt: Format) -> Item:
    """A child's conclusion as the one Responses item it must be."""
    items = client_items([conclusion], fmt, field="conclusion")
    if len(items) != 1:
        raise InvalidInput(
            "a conclusion is exactly one item",
            details=[{"loc": ["body", "conclusion"], "msg": "converts to several items"}],
        )
    return items[0]


def item_fact(
    item: Item,
    *,
    provenance: Mapping[str, Any],
    count_tokens: CountTokens,
    original: dict[str, Any] | None = None,
) -> NewFact:
    """A model-visible item as a fact, counted in the session's encoding."""
    tokens = count_tokens(visible_text(item))
    return NewFact(item_type(item), item, tokens, dict(provenance), original)


def goal_fact(text: str, *, version: int, count_tokens: CountTokens, source: str | None) -> NewFact:
    """Goal version `version`; `source` names the writer in the provenance (None: the client's
    `PUT /goal`)."""
    origin = {**HARNESS, "source": source} if source else dict(HARNESS)
    record = {"type": GOAL_FACT, "version": version, "text": text}
    return NewFact(GOAL_FACT, record, count_tokens(text), origin)


def world_state_facts(
    update: WorldStateUpdate,
    *,
    sections: Mapping[str, Any],
    version: int,
    count_tokens: CountTokens,
    source: str = "world_state",
) -> list[NewFact]:
    """Snapshot `version` (as a merge patch when there is a previous one), then the update
    fragments as harness-authored developer messages, so that the fold can later tell whether
    the model still sees them. `source` names the writer in the provenance."""
    origin = {**HARNESS, "source": source}
    record = (
        {"type": WORLD_STATE_FACT, "version": version, "patch": update.patch}
        if update.patch is not None
        else {"type": WORLD_STATE_FACT, "version": version, "snapshot": dict(sections)}
    )
    return [
        NewFact(WORLD_STATE_FACT, record, 0, origin),
        *(item_fact(item, provenance=origin, count_tokens=count_tokens) for item in update.updates),
    ]


def delegate_brief(
    *,
    goal: str | None,
    sections: Mapping[str, Any],
    brief: Sequence[Item],
    count_tokens: CountTokens,
) -> list[NewFact]:
    """A delegate's first facts: its goal, the inherited sections as world-state version 1
    (sent whole, as to a model that has seen none) and the brief's items."""
    facts = (
        []
        if goal is None
        else [goal_fact(goal, version=1, count_tokens=count_tokens, source="delegate")]
    )
    if sections:
        first = diff_world_state(None, sections, baseline=None, active_history=(), version=1)
        facts += world_state_facts(
            first, sections=sections, version=1, count_tokens=count_tokens, source="delegate"
        )
    facts.extend(
        item_fact(item, provenance={"source": "brief"}, count_tokens=count_tokens) for item in brief
    )
    return facts


def child_link_fact(
    *,
    child_session_id: str,
    kind: ChildKind,
    inherit: Mapping[str, bool],
    unit: str | None,
    fork_seq: int | None,
) -> NewFact:
    """The link a parent's log keeps to each of its children."""
    link = {
        "type": CHILD_FACT,
        "child_session_id": child_session_id,
        "kind": kind,
        "inherit": dict(inherit),
        "unit": unit,
        "fork_seq": fork_seq,
    }
    return NewFact(CHILD_FACT, link, 0, dict(HARNESS))


def conclusion_fact(
    item: Item, *, from_session: str, via: str, count_tokens: CountTokens
) -> NewFact:
    """A child's one conclusion, appended to its parent with a back-reference to the child."""
    back_reference = {"from_session": from_session, "via": via, **HARNESS}
    return item_fact(item, provenance=back_reference, count_tokens=count_tokens)


def _stored_entry(entry: HistoryEntry) -> dict[str, Any]:
    return {"seq": entry.seq} if entry.verbatim and entry.seq is not None else {"item": entry.item}


def compaction_fact(
    result: CompactionResult, *, compaction_id: str, requested_strategy: str
) -> NewFact:
    """The compaction record: the new projection (kept facts by seq, written items whole) and
    what the compaction did."""
    record = {
        "type": COMPACTION_FACT,
        "compaction_id": compaction_id,
        "strategy": result.strategy,
        "requested_strategy": requested_strategy,
        "covered": list(result.covered) if result.covered else None,
        "history": [_stored_entry(entry) for entry in result.history],
        "summary": result.summary.as_dict() if result.summary else None,
        "notes": result.notes.as_dict() if result.notes else None,
        "working_set": [list(pair) for pair in result.working_set],
        "loss_missing": list(result.loss_missing),
        "fell_back": result.fell_back,
    }
    return NewFact(COMPACTION_FACT, record, result.tokens_after, dict(HARNESS))


# Reading: one fact's text, and the fold.


def fact_text(kind: str, item: dict[str, Any]) -> str:
    """What recall reads back of a fact: a client item's model-visible text exactly as
    appended, a goal version's text, and nothing for the service's bookkeeping."""
    if kind == GOAL_FACT:
        return str(item.get("text", ""))
    if kind.startswith(INTERNAL_TYPE_PREFIX):
        return ""
    return visible_text(item)


class LoggedFact(Protocol):
    """What the fold reads of one stored fact."""

    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def item(self) -> dict[str, Any]: ...
    @property
    def provenance(self) -> dict[str, Any]: ...
    @property
    def phase(self) -> str | None: ...
    @property
    def tokens(self) -> int: ...


Visible = tuple[int | None, Item, dict[str, Any], str | None, int | None]
"""One model-visible entry: the fact's seq (None if a compaction wrote it or a fork inherited
it), the item, its append metadata, its phase and its stored token count (None where none)."""


class _Columns(NamedTuple):
    seqs: tuple[int | None, ...]
    items: tuple[Item, ...]
    metadata: tuple[dict[str, Any], ...]
    phases: tuple[str | None, ...]
    tokens: tuple[int | None, ...]


@dataclass(frozen=True)
class Fold:
    """A session's log folded up to `last_seq`. Never mutated once built: it is shared."""

    last_seq: int
    goal: Goal | None
    sections: dict[str, Any]
    baseline: dict[str, Any] | None
    world_version: int
    compactions: int
    compaction_id: str | None
    by_seq: dict[int, Visible]
    visible: tuple[Visible, ...]
    compacted_at: int | None = None
    """How many of `visible` the last compaction left (the rest came after it); None before
    the first compaction."""
    section_versions: dict[str, int] = field(default_factory=dict)
    """The world-state version at which each current section last changed."""
    held_bytes: int = 0
    """JSON bytes of the items this fold holds (in `by_seq` and `visible`): what a cache of
    folds weighs it by."""
    retracted: frozenset[int] = frozenset()
    """The seqs retractions have hidden."""
    reset_at: int = 0
    """The seq of the last reset (0: none); the session's history is what came after it."""
    compacted_by: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """(compaction id, strategy) of the compaction that last took each seq out of the active
    history or reduced it there."""

    @functools.cached_property
    def columns(self) -> _Columns:
        """`visible` as columns, built once per fold (every session-mode call reads them)."""
        return _Columns(
            seqs=tuple(entry[0] for entry in self.visible),
            items=tuple(entry[1] for entry in self.visible),
            metadata=tuple(entry[2] for entry in self.visible),
            phases=tuple(entry[3] for entry in self.visible),
            tokens=tuple(entry[4] for entry in self.visible),
        )


EMPTY_FOLD = Fold(0, None, {}, None, 0, 0, None, {}, ())


def fold_facts(start: Fold, facts: Sequence[LoggedFact], *, last_seq: int) -> Fold:
    """`start` with `facts` (the facts after `start.last_seq`, in seq order) folded in."""
    goal, sections, baseline = start.goal, start.sections, start.baseline
    world_version, compactions = start.world_version, start.compactions
    compaction_id, compacted_at = start.compaction_id, start.compacted_at
    section_versions = start.section_versions
    by_seq = dict(start.by_seq)
    visible = list(start.visible)
    held_bytes = start.held_bytes
    retracted, reset_at, compacted_by = start.retracted, start.reset_at, start.compacted_by
    for fact in facts:
        kind = fact.type
        if kind == GOAL_FACT:
            goal = Goal(version=fact.item["version"], text=fact.item["text"])
        elif kind == WORLD_STATE_FACT:
            previous = sections
            if "snapshot" in fact.item:
                sections = fact.item["snapshot"]
            else:
                sections = apply_patch(sections, fact.item["patch"])
            world_version = fact.item["version"]
            section_versions = {
                section: world_version
                if section not in section_versions or previous.get(section) != value
                else section_versions[section]
                for section, value in sections.items()
            }
            baseline = sections
        elif kind == COMPACTION_FACT:
            compactions += 1
            compaction_id = fact.item.get("compaction_id")
            baseline = None
            before = [entry[0] for entry in visible if entry[0] is not None]
            visible = [
                by_seq[entry["seq"]] if "seq" in entry else (None, entry["item"], {}, None, None)
                for entry in fact.item.get("history", [])
            ]
            kept = {entry[0] for entry in visible}
            mark = (str(compaction_id), str(fact.item.get("strategy")))
            compacted_by = {**compacted_by, **{seq: mark for seq in before if seq not in kept}}
            compacted_at = len(visible)
            held_bytes += len(encode_json(fact.item))
        elif kind == RETRACTION_FACT:
            hidden = frozenset(fact.item["seqs"])
            retracted |= hidden
            if compacted_at is not None:
                compacted_at -= sum(1 for entry in visible[:compacted_at] if entry[0] in hidden)
            visible = [entry for entry in visible if entry[0] not in hidden]
        elif kind == RESET_FACT:
            # As a compaction to nothing: growth counts from here, and the world state last
            # sent is no longer in view.
            visible, compacted_at, baseline = [], 0, None
            reset_at = fact.seq
        elif not kind.startswith(INTERNAL_TYPE_PREFIX):
            # Child links and other bookkeeping (the remaining `contextd.*` kinds) are skipped.
            entry = (fact.seq, fact.item, fact.provenance, fact.phase, fact.tokens)
            by_seq[fact.seq] = entry
            visible.append(entry)
            held_bytes += len(encode_json(fact.item))
    return Fold(
        last_seq,
        goal,
        sections,
        baseline,
        world_version,
        compactions,
        compaction_id,
        by_seq,
        tuple(visible),
        compacted_at,
        section_versions,
        held_bytes,
        retracted,
        reset_at,
        compacted_by,
    )


def fork_fold(parent: ActiveHistory, *, inherit: Mapping[str, bool]) -> Fold:
    """Where a fork's own fold starts: its parent's active history as of the fork point.

    Governance travels only as declared: the parent's world-state fragments stay behind, and
    only the inherited sections are the fork's. Inherited items carry no seq of the fork's.
    """
    visible = tuple(
        (None, item, metadata, phase, None)
        for item, metadata, phase in zip(parent.items, parent.metadata, parent.phases, strict=True)
        if not is_state_fragment(item)
    )
    return replace(
        EMPTY_FOLD,
        goal=parent.goal,
        sections={k: v for k, v in parent.world_state.sections.items() if inherit.get(k)},
        world_version=parent.world_state.version,
        section_versions={
            k: v for k, v in parent.world_state.section_versions.items() if inherit.get(k)
        },
        visible=visible,
        held_bytes=sum(len(encode_json(entry[1])) for entry in visible),
    )


@dataclass(frozen=True)
class ActiveHistory:
    """A session's active history before normalization, with the session facts beside it."""

    session_pk: int
    last_seq: int
    encoding: str
    context_window: int
    items: Sequence[Item]
    metadata: Sequence[dict[str, Any]]
    seqs: Sequence[int | None]
    """The fact each item is, verbatim; None for items a compaction wrote."""
    goal: Goal | None
    world_state: WorldState
    compactions: int
    compaction_id: str | None
    grown_since_compaction: int | None
    """Stored tokens of the items appended since the last compaction; None before the first."""
    phases: Sequence[str | None]
    stored_tokens: Sequence[int | None]
    """Each item's token count in the session's encoding as stored when it was appended (see
    `NewFact.tokens`); None for items a compaction wrote or a fork inherited."""
    unit: str | None
    retracted: frozenset[int] = frozenset()
    """The seqs retractions have hidden."""
    logged: Mapping[int, Visible] = field(default_factory=dict)
    """Every model-visible fact of the log by seq, whatever the active history shows of it."""
    reset_at: int = 0
    """The seq of the last reset (0: none)."""
    compacted_by: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """(compaction id, strategy) of the compaction that last took out or reduced each seq."""

    @classmethod
    def of(
        cls,
        fold: Fold,
        *,
        session_pk: int,
        encoding: str,
        context_window: int,
        unit: str | None,
    ) -> ActiveHistory:
        columns = fold.columns
        return cls(
            session_pk=session_pk,
            last_seq=fold.last_seq,
            encoding=encoding,
            context_window=context_window,
            items=columns.items,
            metadata=columns.metadata,
            seqs=columns.seqs,
            goal=fold.goal,
            world_state=WorldState(
                version=fold.world_version,
                sections=fold.sections,
                baseline=fold.baseline,
                section_versions=fold.section_versions,
            ),
            compactions=fold.compactions,
            compaction_id=fold.compaction_id,
            grown_since_compaction=None
            if fold.compacted_at is None
            else sum(tokens or 0 for tokens in columns.tokens[fold.compacted_at :]),
            phases=columns.phases,
            stored_tokens=columns.tokens,
            unit=unit,
            retracted=fold.retracted,
            logged=fold.by_seq,
            reset_at=fold.reset_at,
            compacted_by=fold.compacted_by,
        )

    def token_counts(
        self, items: Sequence[Item], *, encoding: str, count_tokens: Callable[[str], int]
    ) -> list[int]:
        """The token count of each of `items` (`count_tokens(visible_text(item))`), where
        `count_tokens` counts in `encoding`.

        In the session's encoding an item that is one of this history's own, unchanged
        (normalization returns untouched items as the same objects), takes its stored count;
        any other item, or any item in another encoding, is counted. Identity is safe here:
        this history holds its items alive, so no other object shares an id with one of them.
        """
        stored = (
            {
                id(item): tokens
                for item, tokens in zip(self.items, self.stored_tokens, strict=True)
                if tokens is not None
            }
            if encoding == self.encoding
            else {}
        )
        counts = [stored.get(id(item)) for item in items]
        return [
            count_tokens(visible_text(item)) if known is None else known
            for item, known in zip(items, counts, strict=True)
        ]

    def entries(self, normalized: Sequence[Item]) -> tuple[HistoryEntry, ...]:
        """Normalized items with the fact each one is. Unchanged items are this history's own
        objects; a truncated output is matched to its fact by call_id, but is not verbatim."""
        by_identity = {id(item): seq for item, seq in zip(self.items, self.seqs, strict=True)}
        outputs = {
            (item_type(item), item.get("call_id")): seq
            for item, seq in zip(self.items, self.seqs, strict=True)
            if item_type(item) in OUTPUT_TYPES
        }
        entries = []
        for item in normalized:
            seq = by_identity.get(id(item))
            if seq is not None:
                entries.append(HistoryEntry(seq=seq, item=item, verbatim=True))
            else:
                matched = outputs.get((item_type(item), item.get("call_id")))
                entries.append(HistoryEntry(seq=matched, item=item, verbatim=False))
        return tuple(entries)
