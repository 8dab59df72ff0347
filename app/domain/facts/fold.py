"""The fold: a session's log folded, fact by fact in seq order, into its active history.

Invariants:

- The fold is a pure function of the facts in seq order, and incremental: folding facts
  `a..c` onto the fold of `..a` equals folding `..c` from scratch. A fold is never mutated once
  built, so folds can be shared between requests (the storage shell caches them).
- Internal facts never appear among the active history's items: goal versions, world-state
  facts and compactions are folded into `goal`, `world_state` and `compactions`; child links
  and other bookkeeping are skipped. A compaction replaces the visible items with its own
  `history`, whose entries name a kept fact by seq (verbatim) or carry an item it wrote.
- A retraction hides exactly the seqs it lists; a reset empties the active history as a
  compaction to nothing would, while the goal and the world state stay the session's.
- A fork starts from its parent's active history as of the fork point, without the parent's
  world-state fragments and with only the sections it declared inherited.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from app.domain.facts.columns import LoggedColumns, LoggedUpTo, VisibleColumns
from app.domain.facts.kinds import (
    COMPACTION_FACT,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
)
from app.domain.growing import Prefix
from app.domain.history import HistoryEntry
from app.domain.items import (
    INTERNAL_TYPE_PREFIX,
    OUTPUT_TYPES,
    Item,
    item_tokens,
    item_type,
    logged_key,
)
from app.domain.json_encoding import encode_json
from app.domain.world_state import Goal, WorldState, apply_patch, is_state_fragment


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


@dataclass(frozen=True)
class FactRecord:
    """A `LoggedFact` as plain data: a fact the fold reads that no table row carries (one made
    up by a benchmark or a test)."""

    seq: int
    type: str
    item: dict[str, Any]
    provenance: dict[str, Any]
    phase: str | None
    tokens: int


DERIVED_BYTES_PER_FACT = 1_600
"""What the columns kept with a fold take per fact of its log, beyond the items: its own
columns, a session view, its advice figures, elision runs and the grader's occurrence index
(1,593 bytes at 100,000 facts of the public runs' calls and outputs, as `bench/long_session.py`
measures it)."""


@dataclass(frozen=True)
class Fold:
    """A session's log folded up to `last_seq`. Never changed once built: it is shared, and
    reads only its own prefix of the growing columns it shares with later folds."""

    last_seq: int
    goal: Goal | None
    sections: dict[str, Any]
    baseline: dict[str, Any] | None
    world_version: int
    compactions: int
    compaction_id: str | None
    logged: LoggedColumns
    logged_length: int
    """How many of `logged`'s facts this fold has folded."""
    visible: VisibleColumns
    visible_length: int
    """How many of `visible`'s entries the active history holds."""
    compacted_at: int | None = None
    """How many of the visible entries the last compaction left (the rest came after it); None
    before the first compaction."""
    section_versions: dict[str, int] = field(default_factory=dict)
    """The world-state version at which each current section last changed."""
    held_bytes: int = 0
    """JSON bytes of the items this fold holds (logged and visible): what a cache of folds
    weighs it by."""
    retracted: frozenset[int] = frozenset()
    """The seqs retractions have hidden."""
    reset_at: int = 0
    """The seq of the last reset (0: none); the session's history is what came after it."""
    compacted_by: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """(compaction id, strategy) of the compaction that last took each seq out of the active
    history or reduced it there."""
    epoch: int = 0
    """How many times the visible items were replaced rather than appended to (compactions,
    retractions, resets): views of the visible items advance within one epoch."""
    views: dict[Any, Any] | None = field(default=None, compare=False, repr=False)
    """Views derived from the visible items (`app.domain.session_view`), by what they were
    derived with: shared by every fold of this epoch of one session, each view reading its own
    prefix. None in a fold no fact was folded into yet (`EMPTY_FOLD` is every session's)."""

    @property
    def weight(self) -> int:
        """What this fold holds, in bytes, as a cache weighs it: its items' JSON, and what the
        columns kept with it take per fact (`DERIVED_BYTES_PER_FACT`)."""
        return self.held_bytes + DERIVED_BYTES_PER_FACT * self.logged_length


def _empty_fold() -> Fold:
    return Fold(0, None, {}, None, 0, 0, None, LoggedColumns(), 0, VisibleColumns(), 0)


EMPTY_FOLD = _empty_fold()


def fold_facts(start: Fold, facts: Sequence[LoggedFact], *, last_seq: int) -> Fold:
    """`start` with `facts` (the facts after `start.last_seq`, in seq order) folded in."""
    if start is EMPTY_FOLD:  # every session's start: its columns must never be shared
        start = _empty_fold()
    goal, sections, baseline = start.goal, start.sections, start.baseline
    world_version, compactions = start.world_version, start.compactions
    compaction_id, compacted_at = start.compaction_id, start.compacted_at
    section_versions = start.section_versions
    held_bytes = start.held_bytes
    retracted, reset_at, compacted_by = start.retracted, start.reset_at, start.compacted_by
    epoch = start.epoch
    logged, visible = start.logged, start.visible
    logged_at, visible_at = start.logged_length, start.visible_length
    # Appended in place only by the first fold to extend the shared columns (`growing`).
    owns_logged = logged.claims.claim(logged_at, len(logged))
    owns_visible = visible.claims.claim(visible_at, len(visible))
    try:
        if not owns_logged:
            logged = logged.copy(logged_at, last_seq=start.last_seq)
        if not owns_visible:
            visible = visible.copy(visible_at)
        for fact in facts:
            kind = fact.type
            # Another fold of the same log may have listed it already (one that folded the same
            # own facts after the same visible ones): a seq names one fact, so it is listed once.
            if kind.startswith(INTERNAL_TYPE_PREFIX) and (
                not logged.internal or fact.seq > logged.internal[-1]
            ):
                logged.internal.append(fact.seq)
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
                before = [seq for seq in visible.seqs[: len(visible)] if seq is not None]
                visible = VisibleColumns(
                    logged.entry(entry["seq"])
                    if "seq" in entry
                    else (None, entry["item"], {}, None, None)
                    for entry in fact.item.get("history", [])
                )
                kept = set(visible.seqs)
                mark = (str(compaction_id), str(fact.item.get("strategy")))
                compacted_by = {**compacted_by, **{seq: mark for seq in before if seq not in kept}}
                compacted_at = len(visible)
                held_bytes += len(encode_json(fact.item))
                epoch += 1
            elif kind == RETRACTION_FACT:
                hidden = frozenset(fact.item["seqs"])
                retracted |= hidden
                if compacted_at is not None:
                    compacted_at -= sum(1 for seq in visible.seqs[:compacted_at] if seq in hidden)
                visible = VisibleColumns(
                    entry for entry in visible.entries(len(visible)) if entry[0] not in hidden
                )
                epoch += 1
            elif kind == RESET_FACT:
                # As a compaction to nothing: growth counts from here, and the world state last
                # sent is no longer in view.
                visible, compacted_at, baseline = VisibleColumns(), 0, None
                reset_at = fact.seq
                epoch += 1
            elif not kind.startswith(INTERNAL_TYPE_PREFIX):
                # Child links and other bookkeeping (the remaining `contextd.*` kinds) are
                # skipped.
                entry = (fact.seq, fact.item, fact.provenance, fact.phase, fact.tokens)
                logged.add(entry)
                visible.append(entry)
                held_bytes += len(encode_json(fact.item))
    finally:
        if owns_logged:
            start.logged.claims.release(logged_at)
        if owns_visible:
            start.visible.claims.release(visible_at)
    return Fold(
        last_seq,
        goal,
        sections,
        baseline,
        world_version,
        compactions,
        compaction_id,
        logged,
        len(logged),
        visible,
        len(visible),
        compacted_at,
        section_versions,
        held_bytes,
        retracted,
        reset_at,
        compacted_by,
        epoch,
        start.views if epoch == start.epoch and start.views is not None else {},
    )


def fork_fold(parent: ActiveHistory, *, inherit: Mapping[str, bool]) -> Fold:
    """Where a fork's own fold starts: its parent's active history as of the fork point.

    Governance travels only as declared: the parent's world-state fragments stay behind, and
    only the inherited sections are the fork's. Inherited items carry no seq of the fork's.
    """
    visible = VisibleColumns(
        (None, item, metadata, phase, None)
        for item, metadata, phase in zip(parent.items, parent.metadata, parent.phases, strict=True)
        if not is_state_fragment(item)
    )
    return replace(
        _empty_fold(),
        goal=parent.goal,
        sections={k: v for k, v in parent.world_state.sections.items() if inherit.get(k)},
        world_version=parent.world_state.version,
        section_versions={
            k: v for k, v in parent.world_state.section_versions.items() if inherit.get(k)
        },
        visible=visible,
        visible_length=len(visible),
        held_bytes=sum(len(encode_json(item)) for item in visible.items),
        views={},
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
    phase_set: Sequence[int] = ()
    """`phase_set[n]`: the newest of the first n + 1 items with a phase (-1: none)."""
    index_of: Mapping[int, int] = field(default_factory=dict)
    """Each logged fact's position in `items` (`position_of` reads it)."""
    written: Sequence[int] = ()
    """The positions in `items` of the items no fact of this session's log is."""
    logged: LoggedUpTo = field(default_factory=lambda: LoggedUpTo(LoggedColumns(), 0))
    """Every model-visible fact of the log by seq, whatever the active history shows of it."""
    reset_at: int = 0
    """The seq of the last reset (0: none)."""
    compacted_by: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """(compaction id, strategy) of the compaction that last took out or reduced each seq."""
    epoch: int = 0
    """The fold's epoch: `items` only grew since the last compaction, retraction or reset."""
    views: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """The fold's derived views (see `Fold.views`)."""

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
        visible, length = fold.visible, fold.visible_length
        return cls(
            session_pk=session_pk,
            last_seq=fold.last_seq,
            encoding=encoding,
            context_window=context_window,
            items=Prefix(visible.items, length),
            metadata=Prefix(visible.metadata, length),
            seqs=Prefix(visible.seqs, length),
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
            else visible.cumulative[length] - visible.cumulative[fold.compacted_at],
            phases=Prefix(visible.phases, length),
            stored_tokens=Prefix(visible.tokens, length),
            phase_set=Prefix(visible.phase_set, length),
            index_of=visible.index_of,
            written=Prefix(visible.written, bisect.bisect_left(visible.written, length)),
            unit=unit,
            retracted=fold.retracted,
            logged=LoggedUpTo(fold.logged, fold.logged_length),
            reset_at=fold.reset_at,
            compacted_by=fold.compacted_by,
            epoch=fold.epoch,
            views=fold.views if fold.views is not None else {},
        )

    def position_of(self, seq: int) -> int | None:
        """The position in `items` of the fact `seq`, None when the active history does not hold
        it verbatim."""
        position = self.index_of.get(seq)
        return position if position is not None and position < len(self.items) else None

    @property
    def last_phases(self) -> tuple[str | None, str | None]:
        """The newest item's phase, and the newest phase set before it (None: none)."""
        phases, length = self.phases, len(self.phases)
        if not length:
            return None, None
        earlier = self.phase_set[length - 2] if length > 1 else -1
        return phases[length - 1], phases[earlier] if earlier >= 0 else None

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
            item_tokens(item, count_tokens) if known is None else known
            for item, known in zip(items, counts, strict=True)
        ]

    def entries(self, normalized: Sequence[Item]) -> tuple[HistoryEntry, ...]:
        """Normalized items with the fact each one is. Unchanged items are this history's own
        objects; a truncated output is matched to its fact by call_id, but is not verbatim."""
        by_identity = {id(item): seq for item, seq in zip(self.items, self.seqs, strict=True)}
        outputs = {
            logged_key(item): seq
            for item, seq in zip(self.items, self.seqs, strict=True)
            if item_type(item) in OUTPUT_TYPES
        }
        entries = []
        for item in normalized:
            seq = by_identity.get(id(item))
            if seq is not None:
                entries.append(HistoryEntry(seq=seq, item=item, verbatim=True))
            else:
                matched = outputs.get(logged_key(item))
                entries.append(HistoryEntry(seq=matched, item=item, verbatim=False))
        return tuple(entries)
