"""The history's share of an assembly: the newest atomic groups that fit what the candidates
left, as one contiguous suffix.

Invariants of `fit_history`:

- The kept history is a contiguous suffix of the given history that starts at one of its
  `history_cuts` (no call loses its output, no reasoning item is parted from the item it led
  to), so a history that passes `find_pairing_violations` still passes it after selection.
- It stays within `max_tokens` and, when the history counts toward it, `max_items`, given what
  the candidates already took; the first group that does not fit ends it (older groups are
  never skipped over to fill the room).
- With `history_cut_step`, a history that does not fit starts at a stable point, which
  appending never moves; what fitted but lies before it is dropped as `history_cut`. Stable
  points are the first of the history's cuts at or after every `step` tokens counted from the
  history's start: a cut is stable when a multiple of `step` lies in (tokens before the cut
  before it, tokens before it]. They depend only on the entries before them, so the cut stays
  put across calls until the kept history no longer fits, then jumps a whole step, and the
  calls in between share their prefix. The history starts at the first stable point at or
  after the oldest entry the budget could keep (`_stable_start`), else at that entry.
- The stable point never lies past the latest user message when the budget keeps it: the
  history then starts there at the latest (that message does not move while its turn goes on,
  so it is as stable a start as any, and the user's own words are not cut to save the cache).
- With `keep_newest`, tool outputs are truncated head and tail, each naming the fact that holds
  it whole, in two cases only. The newest group's, when it does not fit on its own. And when the
  group that ends the walk is too large to fit while at least `UNUSED_SHARE` of the history's
  room is left, and every output back to the latest user message can keep `MIN_OUTPUT_TOKENS`
  (`_fit_partly`): that group and the older ones back to the message are shown with their
  outputs cut to steps of a fixed ladder, so that the next calls cut them the same way. Such a
  history starts at that user message, itself a stable start. Every other entry is shown as it
  came.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from app.domain.assemble.model import (
    RAW_FORM,
    TRUNCATED_FORM,
    AssemblyInput,
    DropReason,
    fits,
)
from app.domain.history import EntryItems, HistoryEntry, cuts_from_end, history_cuts
from app.domain.items import OUTPUT_TYPES, CountTokens, Item, item_tokens, item_type
from app.domain.truncation import MIN_OUTPUT_TOKENS, shrink_outputs, truncate_tool_output

UNUSED_SHARE = 4
"""Groups beyond the one that ends the walk are shown cut (`_fit_partly`) only when that group
leaves at least 1/`UNUSED_SHARE` of the history's room unused: a history that fills its window
with whole groups is not traded for cut ones."""


def atomic_groups(items: Sequence[Item]) -> tuple[range, ...]:
    """Index ranges that history is cut between, in order, covering `items`: the ranges between
    consecutive `history_cuts`, the last one running to the end."""
    cuts = history_cuts(items)
    bounds = tuple(cuts) if cuts[-1] == len(items) else (*cuts, len(items))
    return tuple(range(start, end) for start, end in itertools.pairwise(bounds))


class _Entries:
    """The history's items and tokens, read from the newest end and counted once each."""

    def __init__(self, history: Sequence[HistoryEntry], count: CountTokens) -> None:
        self.history, self._count = history, count
        self._tokens: dict[int, int] = {}
        self.items = EntryItems(history)

    def tokens(self, k: int) -> int:
        known = self.history[k].tokens  # a session's history comes counted
        if known is None:
            known = self._tokens.get(k)
            if known is None:
                known = self._tokens[k] = item_tokens(self.history[k].item, self._count)
        return known

    def groups(self) -> Iterator[range]:
        """The atomic groups (between consecutive cuts), newest first."""
        bound: int | None = None
        for cut in cuts_from_end(self.items):
            if bound is not None and cut < bound:
                yield range(cut, bound)
            bound = cut


def _shrink_newest(
    entries: _Entries,
    groups: Sequence[range],
    *,
    room: int,
    count: CountTokens,
) -> dict[int, tuple[Item, int]]:
    """The tool outputs of the newest group (`groups[0]`, newest first) truncated head and tail,
    each naming the fact that holds it whole, so that the group fits `room`, and fits beside the
    groups back to the latest user message too where that leaves each output
    `MIN_OUTPUT_TOKENS`. Empty when even `room` cannot hold the group's calls and the least of
    each output. `groups` holds at least the newest group; more are read from `entries` only
    while they could matter."""
    history = entries.history
    newest = groups[0]
    outputs = [
        k
        for k in newest
        if item_type(history[k].item) in OUTPUT_TYPES
        and isinstance(history[k].item.get("output"), str | list)
    ]
    fixed = sum(entries.tokens(k) for k in newest if k not in outputs)
    floor = fixed + MIN_OUTPUT_TOKENS * len(outputs)
    # The turn back to the latest user message: read only while it could still leave room.
    between, found = 0, False
    older = entries.groups()
    next(older, None)
    for span in older:
        if room - between < floor:
            break
        between += sum(entries.tokens(k) for k in span)
        if any(
            item_type(history[k].item) == "message" and history[k].item.get("role") == "user"
            for k in span
        ):
            found = True
            break
    target = room - between if found and room - between >= floor else room
    shrunk = shrink_outputs(
        [
            (
                history[k].item["output"],
                entries.tokens(k),
                f"fact seq {history[k].seq}" if history[k].seq is not None else None,
            )
            for k in outputs
        ],
        budget=target - fixed,
        count_tokens=count,
    )
    if not outputs or shrunk is None:
        return {}
    changed: dict[int, tuple[Item, int]] = {}
    for k, output in zip(outputs, shrunk, strict=True):
        if output is not history[k].item["output"]:
            item = {**history[k].item, "output": output}
            changed[k] = (item, item_tokens(item, count))
    return changed


def _cuttable(entry: HistoryEntry) -> bool:
    """Whether `entry` is a tool output truncation can cut (its output text or parts)."""
    return item_type(entry.item) in OUTPUT_TYPES and isinstance(
        entry.item.get("output"), str | list
    )


def _is_user_message(entry: HistoryEntry) -> bool:
    return item_type(entry.item) == "message" and entry.item.get("role") == "user"


def _reference(entry: HistoryEntry) -> str | None:
    return f"fact seq {entry.seq}" if entry.seq is not None else None


def _ladder_step(sizes: Sequence[int], *, room: int, least: int = MIN_OUTPUT_TOKENS) -> int:
    """The highest step `least` × 2^k to which cutting every one of `sizes` fits `room` (each
    size over the step cut to it); `least` when none higher does."""
    step = least
    largest = max(sizes, default=0)
    while step < largest and sum(min(size, 2 * step) for size in sizes) <= room:
        step *= 2
    return step


def _fit_partly(
    entries: _Entries,
    stopped: range,
    older: Iterator[range],
    *,
    room: int,
    count: CountTokens,
) -> tuple[list[range], dict[int, tuple[Item, int]]] | None:
    """The groups from `stopped` (the group that ended the walk) back to the latest user
    message, with their tool outputs cut so that together they fit `room`: the older outputs
    to the highest step of the ladder `MIN_OUTPUT_TOKENS` × 2^k at which all fit, the outputs
    of `stopped` (the newest of them) to the highest step at which they fit what the others
    leave. Steps, not shares of what is left: the same outputs are cut the same way on the next
    calls, as long as the turn leaves the same steps. Returns the groups (newest first) and the
    cut items with their tokens; None when the way back to the latest user message cannot keep
    `MIN_OUTPUT_TOKENS` of every output within `room`. Reads older groups only while that
    least still fits."""
    history = entries.history

    def least(group: range) -> int:
        return sum(
            min(entries.tokens(k), MIN_OUTPUT_TOKENS)
            if _cuttable(history[k])
            else entries.tokens(k)
            for k in group
        )

    floor = least(stopped)
    taken = [stopped]
    reached = any(_is_user_message(history[k]) for k in stopped)
    for group in () if reached else older:
        floor += least(group)
        if floor > room:
            break
        taken.append(group)
        if any(_is_user_message(history[k]) for k in group):
            reached = True
            break
    if floor > room or not reached:
        return None
    newest = [k for k in stopped if _cuttable(history[k])]
    outputs = [k for group in taken[1:] for k in group if _cuttable(history[k])]
    fixed = sum(entries.tokens(k) for group in taken for k in group if not _cuttable(history[k]))
    newest_least = sum(min(entries.tokens(k), MIN_OUTPUT_TOKENS) for k in newest)
    cut: dict[int, tuple[Item, int]] = {}

    def cut_to(k: int, step: int) -> int:
        """Cuts output `k` to `step` when over it; its tokens as shown."""
        if entries.tokens(k) <= step:
            return entries.tokens(k)
        item = history[k].item
        output = truncate_tool_output(
            item["output"],
            budget=step,
            mode="tokens",
            count_tokens=count,
            reference=_reference(history[k]),
        )
        shown = {**item, "output": output}
        cut[k] = (shown, item_tokens(shown, count))
        return cut[k][1]

    step = _ladder_step([entries.tokens(k) for k in outputs], room=room - fixed - newest_least)
    left = room - fixed - sum(cut_to(k, step) for k in outputs)
    newest_step = _ladder_step([entries.tokens(k) for k in newest], room=left)
    total = room - left + sum(cut_to(k, newest_step) for k in newest)
    return (taken, cut) if total <= room else None


@dataclass(frozen=True)
class HistoryFit:
    """Which of the history an assembly keeps, and the assembly's totals with it counted.

    Only what it shows is held entry by entry; what it drops is two runs: the entries the budget
    could not keep (before `fitting_start`) and those cut at a stable point (from there to
    `start`)."""

    start: int
    """The first entry kept (the history's length when none is)."""
    fitting_start: int
    """The first entry the budget could keep; those from it up to `start` are `history_cut`."""
    reason: DropReason | None
    """Why the entries before `fitting_start` were dropped (None when none were)."""
    total_tokens: int
    counted_items: int
    """The items counted toward `max_items`: the candidates', and the history's when it counts."""
    shown_items: tuple[Item, ...]
    """Each entry's item as shown, from `start` on: the entry's own, or a new item with
    truncated outputs."""
    shown_tokens: tuple[int, ...]
    """The tokens of each item as shown, from `start` on."""
    dropped_tokens: int = 0
    """The tokens of the entries before `fitting_start`."""
    cut_tokens: int = 0
    """The tokens of the entries from `fitting_start` to `start`."""

    def dropped(self, k: int) -> DropReason | None:
        """Why the k-th entry is not shown; None when it is."""
        if k >= self.start:
            return None
        return self.reason if k < self.fitting_start else "history_cut"

    def item(self, k: int) -> Item:
        """The k-th entry's item as shown (k >= `start`)."""
        return self.shown_items[k - self.start]

    def tokens(self, k: int) -> int:
        """The tokens of the k-th entry's item as shown (k >= `start`)."""
        return self.shown_tokens[k - self.start]

    def form(self, k: int, entry: HistoryEntry) -> str:
        """The form the k-th shown entry (`entry`) is in: raw, or truncated where its outputs
        were cut to fit."""
        return RAW_FORM if self.item(k) is entry.item else TRUNCATED_FORM


def fit_history(
    inp: AssemblyInput, *, total_tokens: int, counted_items: int, count: CountTokens
) -> HistoryFit:
    """The history of `inp` fitted to what is left after the selected candidates' `total_tokens`
    and `counted_items`; see the module doc. Reads the history from its newest end, as far as
    the budget (and, with `history_cut_step`, the next stable point before it) reaches."""
    budget = inp.budget
    history = inp.history
    length = len(history)
    entries = _Entries(history, count)
    shown: dict[int, tuple[Item, int]] = {}
    start = length
    reason: DropReason | None = None
    groups = entries.groups()
    walked: list[range] = []
    stopped: range | None = None  # the group that ended the walk for want of tokens
    room = None if budget.max_tokens is None else budget.max_tokens - total_tokens
    suffix = 0  # tokens of the entries from `start` on, as the history has them (uncut)
    for newest, span in enumerate(groups, start=1):
        walked.append(span)
        span_tokens = sum(entries.tokens(k) for k in span)
        uncut = span_tokens
        if inp.history_counts_toward_max_items and not fits(
            len(span), budget.max_items, used=counted_items
        ):
            reason = "max_items"
            break
        if (
            newest == 1
            and inp.keep_newest
            and budget.max_tokens is not None
            and not fits(span_tokens, budget.max_tokens, used=total_tokens)
        ):
            shown = _shrink_newest(
                entries, walked, room=budget.max_tokens - total_tokens, count=count
            )
            span_tokens = sum(shown[k][1] if k in shown else entries.tokens(k) for k in span)
        if not fits(span_tokens, budget.max_tokens, used=total_tokens):
            reason, stopped = "max_tokens", span
            break
        start = span.start
        suffix += uncut
        total_tokens += span_tokens
        if inp.history_counts_toward_max_items:
            counted_items += len(span)
    partly = None
    if (
        inp.keep_newest
        and stopped is not None
        and room is not None
        and budget.max_tokens is not None
        and (budget.max_tokens - total_tokens) * UNUSED_SHARE >= room
    ):
        partly = _fit_partly(
            entries, stopped, groups, room=budget.max_tokens - total_tokens, count=count
        )
        if partly is not None and inp.history_counts_toward_max_items:
            added = sum(len(group) for group in partly[0])
            if not fits(added, budget.max_items, used=counted_items):
                partly = None
    if partly is not None:
        taken, cut = partly
        for k in stopped or ():
            shown.pop(k, None)  # `_shrink_newest`'s cut of it, if any, gives way to this one
        shown.update(cut)
        for group in taken:
            suffix += sum(entries.tokens(k) for k in group)
            total_tokens += sum(shown[k][1] if k in shown else entries.tokens(k) for k in group)
            if inp.history_counts_toward_max_items:
                counted_items += len(group)
        start = taken[-1].start
    fitting_start = start
    whole = (
        inp.history_tokens
        if inp.history_tokens is not None
        else suffix + sum(entries.tokens(k) for k in range(start))
    )
    cut_tokens = 0
    if start > 0 and inp.history_cut_step is not None and partly is None:
        # The latest user message the budget keeps is where the history starts at the latest.
        latest_user = next(
            (
                span.start
                for span in walked
                if span.start >= fitting_start and any(_is_user_message(history[k]) for k in span)
            ),
            None,
        )
        start = _stable_start(
            entries,
            walked,
            groups,
            fitting_start=fitting_start,
            whole=whole,
            suffix=suffix,
            step=inp.history_cut_step,
        )
        if latest_user is not None:
            start = min(start, latest_user)
        cut_tokens = sum(entries.tokens(k) for k in range(fitting_start, start))
        cut_shown = sum(
            shown[k][1] if k in shown else entries.tokens(k) for k in range(fitting_start, start)
        )
        total_tokens -= cut_shown
        if inp.history_counts_toward_max_items:
            counted_items -= start - fitting_start
    kept = range(start, length)
    return HistoryFit(
        start=start,
        fitting_start=fitting_start,
        reason=reason,
        total_tokens=total_tokens,
        counted_items=counted_items,
        shown_items=tuple(shown[k][0] if k in shown else history[k].item for k in kept),
        shown_tokens=tuple(shown[k][1] if k in shown else entries.tokens(k) for k in kept),
        dropped_tokens=whole - suffix,
        cut_tokens=cut_tokens,
    )


def _stable_start(
    entries: _Entries,
    walked: list[range],
    groups: Iterator[range],
    *,
    fitting_start: int,
    whole: int,
    suffix: int,
    step: int,
) -> int:
    """The stable point the history starts at (see the module docstring), read from the newest
    end: the first cut at or after `fitting_start` (and before the end) with a multiple of
    `step` in (tokens before the cut before it, tokens before it], else `fitting_start`.
    `walked` are the groups read so far, newest first; the one before `fitting_start` is read
    from `groups` when needed."""
    # The cuts from `fitting_start` to the end, with the tokens before each.
    cuts = sorted({span.start for span in walked if span.start >= fitting_start})
    before = {fitting_start: whole - suffix}
    for span in sorted((s for s in walked if s.start >= fitting_start), key=lambda s: s.start):
        before[span.stop] = before[span.start] + sum(entries.tokens(k) for k in span)
    # The cut before `fitting_start`: the start of the group that ends there.
    previous = next((span for span in walked if span.stop == fitting_start), None)
    if previous is None:
        previous = next(groups, None)
    previous_before = (
        before[fitting_start] - sum(entries.tokens(k) for k in previous) if previous else None
    )
    for cut in cuts:
        if cut >= len(entries.history):
            break
        if previous_before is not None and before[cut] // step > previous_before // step:
            return cut
        previous_before = before[cut]
    return fitting_start
