"""The session view: a session's active history normalized and read into typed columns once,
then advanced by the appended items only.

Normalization (`app.domain.normalize`) pairs every call with its output, and an output appended
now can answer a call made long ago, so a normalized history is not the concatenation of its
parts' normalizations. It is kept as a *settled* part, which no item appended later can change,
and an open *tail*, normalized again on each advance. The tail starts where the oldest call
still waiting for its output is, so it stays as short as the calls an agent has in flight.

Invariants:

- For any active history, `view_of(None, history)` and any chain of `view_of(view, ...)` over
  its prefixes give a view whose `items`, `sources`, `seqs`, `tokens` and `report` equal those
  of `normalize_history` over the whole history (pinned by a property test at every seq of
  every trajectory).
- A part `[boundary, p)` settles only when no later item can change its normalized form:
  every call in it that owns its key has its output before `p`, and every output moved to the
  end of its call's batch belongs to a batch that an item before `p` closed. Outputs before `p`
  that answer no call before `p` stay *pending*: a call appended later may claim them, and they
  are normalized with the tail until then.
- The settled columns only grow, and are shared by every view built on them: a view reads its
  own prefix of them. An advance appends to them in place only when it is the first to extend
  that prefix (a claim made atomically under the GIL with `dict.setdefault`); otherwise it copies
  the prefix first, so views never see each other's rows.
- A view belongs to one fold epoch: a compaction, retraction or reset replaces the active
  history and so starts a new view from scratch; appends only advance it (a call that claims
  a pending output starts it again too).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from app.domain.facts import ActiveHistory
from app.domain.growing import Prefix, grown
from app.domain.history import HistoryEntry
from app.domain.items import CountTokens, Item, item_tokens
from app.domain.normalize import (
    NormalizedPart,
    NormalizeReport,
    NormalizeResult,
    answer_key,
    normalize_part,
)
from app.domain.settled_columns import SettledColumns
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import is_state_fragment

__all__ = [
    "ActiveColumns",
    "HistoryView",
    "ViewSettings",
    "active_columns",
    "view_of",
    "view_record",
    "view_restored",
]


@dataclass(frozen=True)
class ActiveColumns:
    """The columns of an active history that the view reads, by input index."""

    epoch: int
    items: Sequence[Item]
    metadata: Sequence[Mapping[str, Any] | None]
    seqs: Sequence[int | None]
    stored_tokens: Sequence[int | None]


def active_columns(active: ActiveHistory) -> ActiveColumns:
    """The columns of `active` the view reads."""
    return ActiveColumns(
        epoch=active.epoch,
        items=active.items,
        metadata=active.metadata,
        seqs=active.seqs,
        stored_tokens=active.stored_tokens,
    )


@dataclass(frozen=True)
class ViewSettings:
    """What a view normalizes and counts with. `stored_counts`: whether the history's stored
    token counts are in `count`'s encoding (an unchanged item then takes its stored count)."""

    count: CountTokens
    input_modalities: frozenset[str]
    truncation: TruncationPolicy
    stored_counts: bool


class _SettledKeys:
    """The keys a view's settled part owns: those whose call lies before its boundary."""

    def __init__(self, settled: SettledColumns, boundary: int) -> None:
        self._settled, self._boundary = settled, boundary

    def __contains__(self, key: object) -> bool:
        call = self._settled.call_of(key)
        return call is not None and call < self._boundary


@dataclass(frozen=True)
class _Tail:
    """The open tail's normalization and its columns."""

    part: NormalizedPart
    seqs: tuple[int | None, ...]
    tokens: tuple[int, ...]
    fragments: tuple[bool, ...]
    offered: tuple[int, ...] = ()
    """The tail's offered positions (in the whole normalized history)."""
    offered_tokens: int = 0
    entries: tuple[HistoryEntry, ...] = ()
    """The tail's offered items as assembly input."""
    row_of: Mapping[int, int] = field(default_factory=dict)
    """The row of each of the tail's inputs (and of each pending one) that has one."""
    excluded_at: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryView:
    """A session's normalized active history as of `inputs` active items (see the module
    docstring): the settled columns' first `lengths`, then the open tail's."""

    epoch: int
    inputs: int
    boundary: int
    """The input index the tail starts at: every item before it is settled or pending."""
    pending: tuple[int, ...]
    """Input indices, before `boundary`, of outputs no settled call owns, in order."""
    settled: SettledColumns
    lengths: tuple[int, ...]
    tail: _Tail
    complete: bool = True
    """False for a view restored from a checkpoint: it holds the settled part and no tail, so
    the next `view_of` normalizes its tail, even over as many inputs."""

    @property
    def settled_rows(self) -> int:
        return self.lengths[0]

    def __len__(self) -> int:
        return self.lengths[0] + len(self.tail.part.items)

    @property
    def items(self) -> Sequence[Item]:
        """The normalized history."""
        return Prefix(self.settled.items, self.lengths[0], self.tail.part.items)

    @property
    def sources(self) -> Sequence[int | None]:
        """The active item each normalized item came from (None: synthesized)."""
        return Prefix(self.settled.sources, self.lengths[0], self.tail.part.sources)

    @property
    def seqs(self) -> Sequence[int | None]:
        """The fact each normalized item stands for (the fact it came from, a cut output
        included); None for items the service wrote."""
        return Prefix(self.settled.seqs, self.lengths[0], self.tail.seqs)

    @property
    def tokens(self) -> Sequence[int]:
        """Each normalized item's tokens in the view's encoding."""
        return Prefix(self.settled.tokens, self.lengths[0], self.tail.tokens)

    @property
    def fragments(self) -> Sequence[bool]:
        """Whether each normalized item is a goal or world-state fragment."""
        return Prefix(self.settled.fragments, self.lengths[0], self.tail.fragments)

    @property
    def offered_positions(self) -> Sequence[int]:
        """The positions of the items session-mode assembly offers as history: all but goal and
        world-state fragments, which it renders from the fold instead."""
        return Prefix(self.settled.offered, self.lengths[6], self.tail.offered)

    @property
    def total_tokens(self) -> int:
        """The tokens of the normalized history, all told."""
        return self.settled.cumulative[self.lengths[0]] + sum(self.tail.tokens)

    @property
    def offered_tokens(self) -> int:
        """The tokens of the offered items, all told."""
        return self.settled.offered_cumulative[self.lengths[6]] + self.tail.offered_tokens

    def row_of(self, source: int) -> int | None:
        """The row (normalized position) of the active item at `source`; None when
        normalization left it out."""
        row = self.settled.row_of.get(source)
        if row is not None and row < self.lengths[0]:
            return row
        if source < self.boundary and source not in self.pending:
            return None
        return self.tail.row_of.get(source)

    def excluded_reason(self, source: int) -> str | None:
        """Why normalization excluded the active item at `source`, with the detail where there
        is one (`ExcludedItem.explained`); None when it did not."""
        if source < self.boundary:
            return self.settled.excluded_at.get(source)
        return self.tail.excluded_at.get(source)

    @property
    def excluded_count(self) -> int:
        """How many active items normalization excluded (O(1), unlike `report`)."""
        return self.lengths[1] + len(self.tail.part.report.excluded)

    def offered_history(self) -> Sequence[HistoryEntry]:
        """The offered items as assembly input, named `history:<n>` in order: each settled
        one built once, when it settled (an assembly reads the newest it shows)."""
        return Prefix(self.settled.entries, self.lengths[6], self.tail.entries)

    @property
    def report(self) -> NormalizeReport:
        """The report `normalize_history` gives for the whole history (O(history): for the
        endpoints that answer with the whole history)."""
        _, excluded, reordered, deduplicated, stripped, truncated, _, _ = self.lengths
        tail = self.tail.part.report
        settled = self.settled
        return NormalizeReport(
            synthesized_outputs=tail.synthesized_outputs,
            removed_orphans=tail.removed_orphans,
            reordered_outputs=(*settled.reordered[:reordered], *tail.reordered_outputs),
            deduplicated_outputs=tuple(
                heapq.merge(
                    settled.deduplicated[:deduplicated],
                    tail.deduplicated_outputs,
                    key=lambda entry: entry.index,
                )
            ),
            stripped_media=(*settled.stripped[:stripped], *tail.stripped_media),
            truncated_outputs=(*settled.truncated[:truncated], *tail.truncated_outputs),
            excluded=(*settled.excluded[:excluded], *tail.excluded),
        )

    def result(self) -> NormalizeResult:
        return NormalizeResult(items=tuple(self.items), report=self.report)


def view_of(
    previous: HistoryView | None, active: ActiveColumns, *, settings: ViewSettings
) -> HistoryView:
    """The view of `active`, advanced from `previous` when that is a view of a prefix of it
    (same epoch, no more inputs), else built from scratch."""
    inputs = len(active.items)
    if previous is None or previous.epoch != active.epoch or previous.inputs > inputs:
        previous = _empty(active.epoch)
    if previous.inputs == inputs and previous.complete:
        return previous
    return _advance(previous, active, settings=settings)


def _empty(epoch: int) -> HistoryView:
    empty = SettledColumns()
    tail = _Tail(
        NormalizedPart((), (), NormalizeReport(), (), {}, {}, ()), seqs=(), tokens=(), fragments=()
    )
    return HistoryView(epoch, 0, 0, (), empty, empty.lengths(), tail)


def _normalize_tail(
    active: ActiveColumns,
    *,
    boundary: int,
    pending: Sequence[int],
    settled: SettledColumns,
    rows: int,
    settings: ViewSettings,
) -> NormalizedPart:
    entries = [(index, active.items[index]) for index in pending]
    entries += [(index, active.items[index]) for index in range(boundary, len(active.items))]
    return normalize_part(
        entries,
        count_tokens=settings.count,
        input_modalities=settings.input_modalities,
        truncation=settings.truncation,
        item_metadata=active.metadata,
        seqs=active.seqs,
        settled_keys=_SettledKeys(settled, boundary),
        output_offset=rows,
    )


def _settle_point(part: NormalizedPart, *, boundary: int, end: int) -> int:
    """The furthest input index `p` in `(boundary, end]` such that `[boundary, p)` can settle
    (see the module docstring); `boundary` when none can."""
    needs: dict[int, int] = {}
    unreachable = end + 1
    for call, answer in part.answered.items():
        needs[call] = unreachable if answer is None else answer + 1
    for call, closer in part.displaced:
        needs[call] = max(needs.get(call, 0), unreachable if closer is None else closer + 1)
    best, required = boundary, 0
    calls = sorted(call for call in needs if call >= boundary)
    # p is valid when every call before it is satisfied by p: walk the calls in order, and
    # every gap between the requirement so far and the next call is a valid point.
    for call in calls:
        if required <= call and call > boundary:
            best = call
        required = max(required, needs[call])
    if required <= end:
        best = end
    return best


def _advance(
    previous: HistoryView, active: ActiveColumns, *, settings: ViewSettings
) -> HistoryView:
    settled, lengths = previous.settled, previous.lengths
    boundary, pending = previous.boundary, previous.pending
    part = _normalize_tail(
        active,
        boundary=boundary,
        pending=pending,
        settled=settled,
        rows=lengths[0],
        settings=settings,
    )
    if any(answer_key(active.items[index]) in part.owners for index in pending):
        # A call now claims an output normalization had removed: back among the history's
        # items, it may split a run of calls the settled part holds. Rare (an output logged
        # before its call), so the view starts again.
        return _advance(_empty(active.epoch), active, settings=settings)
    point = _settle_point(part, boundary=boundary, end=len(active.items))
    if point > boundary:
        settled_part = part

        def settle(into: SettledColumns) -> None:
            nonlocal pending
            pending = _settle(
                into,
                settled_part,
                active,
                pending=pending,
                boundary=boundary,
                point=point,
                settings=settings,
            )

        settled = grown(
            settled,
            read=lengths,
            now=settled.lengths(),
            copy=lambda: previous.settled.copy(lengths, boundary=boundary),
            grow=settle,
        )
        boundary, lengths = point, settled.lengths()
        part = _normalize_tail(
            active,
            boundary=boundary,
            pending=pending,
            settled=settled,
            rows=lengths[0],
            settings=settings,
        )
    offset, first = lengths[0], lengths[6]
    rows = [
        _row(item, source, active, settings)
        for item, source in zip(part.items, part.sources, strict=True)
    ]
    offered = [(offset + k, row) for k, row in enumerate(rows) if not row.fragment]
    tail = _Tail(
        part,
        seqs=tuple(row.seq for row in rows),
        tokens=tuple(row.tokens for row in rows),
        fragments=tuple(row.fragment for row in rows),
        offered=tuple(position for position, _ in offered),
        offered_tokens=sum(row.tokens for _, row in offered),
        entries=tuple(
            row.entry(item_ordinal) for item_ordinal, (_, row) in enumerate(offered, start=first)
        ),
        row_of={source: offset + k for k, source in enumerate(part.sources) if source is not None},
        excluded_at={entry.index: entry.explained for entry in part.report.excluded},
    )
    return HistoryView(active.epoch, len(active.items), boundary, pending, settled, lengths, tail)


class _Row(NamedTuple):
    """One normalized item's columns, read once."""

    item: Item
    seq: int | None
    tokens: int
    fragment: bool

    def entry(self, ordinal: int) -> HistoryEntry:
        """The item as the `ordinal`-th entry of the offered history."""
        return HistoryEntry(self.seq, self.item, True, self.tokens, f"history:{ordinal}")


def _row(item: Item, source: int | None, active: ActiveColumns, settings: ViewSettings) -> _Row:
    return _Row(
        item, _seq(active, source), _tokens(item, source, active, settings), is_state_fragment(item)
    )


def _seq(active: ActiveColumns, source: int | None) -> int | None:
    return None if source is None else active.seqs[source]


def _tokens(item: Item, source: int | None, active: ActiveColumns, settings: ViewSettings) -> int:
    """An item's tokens: its stored count when it is the active item unchanged and the counts
    are in this encoding, else counted."""
    if settings.stored_counts and source is not None and item is active.items[source]:
        stored = active.stored_tokens[source]
        if stored is not None:
            return stored
    return item_tokens(item, settings.count)


def _settle(
    settled: SettledColumns,
    part: NormalizedPart,
    active: ActiveColumns,
    *,
    pending: Sequence[int],
    boundary: int,
    point: int,
    settings: ViewSettings,
) -> tuple[int, ...]:
    """Appends the normalized items of inputs `[boundary, point)` (and of the pending outputs
    their calls claimed) to `settled`; returns the outputs before `point` left pending: those
    no call before `point` owns."""
    for owner, call in part.owners.items():
        if call < point:
            settled.own(owner, call)
    owned = _SettledKeys(settled, point)
    excluded = {entry.index for entry in part.report.excluded}
    still_pending = tuple(
        index
        for index in (*pending, *range(boundary, point))
        if index not in excluded
        and isinstance(item := active.items[index], dict)
        and (answered := answer_key(item)) is not None
        and answered not in owned
    )
    waiting = set(still_pending)
    rows = 0
    for source in part.sources:
        if source is None or source >= point or source in waiting:
            break
        rows += 1
    offset = len(settled.items)
    for k in range(rows):
        source = part.sources[k]
        assert source is not None  # the settled rows all come from inputs (see above)
        row = _row(part.items[k], source, active, settings)
        if row.seq is None or row.item is not active.items[source]:
            settled.whole_rows.append(len(settled.items))
            settled.whole.append(row.item)
        settled.row_of[source] = len(settled.items)
        settled.items.append(row.item)
        settled.sources.append(source)
        settled.seqs.append(row.seq)
        settled.tokens.append(row.tokens)
        settled.cumulative.append(settled.cumulative[-1] + row.tokens)
        settled.fragments.append(row.fragment)
        if not row.fragment:
            settled.entries.append(row.entry(len(settled.offered)))
            settled.offered.append(offset + k)
            settled.offered_cumulative.append(settled.offered_cumulative[-1] + row.tokens)
    report = part.report
    for entry in report.excluded:
        if entry.index < point:
            settled.excluded.append(entry)
            settled.excluded_at[entry.index] = entry.explained
    settled.deduplicated.extend(
        entry
        for entry in report.deduplicated_outputs
        if entry.index < point and entry.index not in waiting
    )
    settled.reordered.extend(
        entry for entry in report.reordered_outputs if entry.to_index < offset + rows
    )
    settled.stripped.extend(entry for entry in report.stripped_media if entry.index < offset + rows)
    settled.truncated.extend(
        entry
        for entry, at in zip(report.truncated_outputs, part.truncated_at, strict=True)
        if at < rows
    )
    return still_pending


def view_record(view: HistoryView) -> dict[str, Any]:
    """The settled part of `view` as a checkpoint holds it."""
    return {
        "epoch": view.epoch,
        "boundary": view.boundary,
        "pending": list(view.pending),
        **view.settled.record(view.lengths),
    }


def view_restored(record: Mapping[str, Any], fact_item: Callable[[int], Item]) -> HistoryView:
    """The view `record` holds (`view_record`), its unchanged items read by `fact_item(seq)`
    when read; incomplete, so the next `view_of` normalizes its tail."""
    settled = SettledColumns.restored(record, fact_item)
    boundary = record["boundary"]
    return HistoryView(
        record["epoch"],
        boundary,
        boundary,
        tuple(record["pending"]),
        settled,
        settled.lengths(),
        _empty(record["epoch"]).tail,
        complete=False,
    )
