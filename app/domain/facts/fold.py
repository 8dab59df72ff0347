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

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from app.domain.facts.kinds import (
    COMPACTION_FACT,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
)
from app.domain.history import HistoryEntry
from app.domain.items import INTERNAL_TYPE_PREFIX, OUTPUT_TYPES, Item, item_tokens, item_type
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
            item_tokens(item, count_tokens) if known is None else known
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
