"""The history's share of an assembly: the newest atomic groups that fit what the candidates
left, as one contiguous suffix.

Invariants of `fit_history`:

- The kept history is a contiguous suffix of the given history that starts at one of its
  `history_cuts` (no call loses its output, no reasoning item is parted from the item it led
  to), so a history that passes `find_pairing_violations` still passes it after selection.
- It stays within `max_tokens` and, when the history counts toward it, `max_items`, given what
  the candidates already took; the first group that does not fit ends it (older groups are
  never skipped over to fill the room).
- With `history_cut_step`, a history that does not fit starts at a stable point
  (`stable_history_start`), which appending never moves; what fitted but lies before it is
  dropped as `history_cut`.
- With `keep_newest`, only the newest group's tool outputs are ever truncated, each naming the
  fact that holds it whole; every other entry is shown as it came.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.assemble.model import (
    RAW_FORM,
    TRUNCATED_FORM,
    AssemblyInput,
    DropReason,
    fits,
)
from app.domain.history import HistoryEntry, history_cuts
from app.domain.items import OUTPUT_TYPES, CountTokens, Item, item_tokens, item_type
from app.domain.truncation import MIN_OUTPUT_TOKENS, shrink_outputs


def stable_history_start(
    cuts: Sequence[int], tokens: Sequence[int], *, fitting_start: int, step: int
) -> int:
    """Where a history that no longer fits is cut: the first stable point at or after
    `fitting_start` (the oldest entry the budget could keep), else `fitting_start` itself.
    Stable points are the first of the history's cuts (`history_cuts`) at or after every `step`
    tokens counted from the history's start. They depend only on the entries before them, so
    appending never moves one: the cut stays put across calls until the kept history no longer
    fits, then jumps a whole step, and the calls in between share their prefix.
    """
    position, passed, next_mark = 0, 0, step
    for cut in cuts:
        passed += sum(tokens[position:cut])
        position = cut
        if passed >= next_mark:
            if fitting_start <= cut < len(tokens):
                return cut
            next_mark = (passed // step + 1) * step
    return fitting_start


def atomic_groups(items: Sequence[Item]) -> tuple[range, ...]:
    """Index ranges that history is cut between, in order, covering `items`: the ranges between
    consecutive `history_cuts`, the last one running to the end."""
    return _groups(history_cuts(items), len(items))


def _groups(cuts: Sequence[int], length: int) -> tuple[range, ...]:
    bounds = tuple(cuts) if cuts[-1] == length else (*cuts, length)
    return tuple(range(start, end) for start, end in itertools.pairwise(bounds))


def _shrink_newest(
    history: Sequence[HistoryEntry],
    tokens: Sequence[int],
    spans: Sequence[range],
    *,
    room: int,
    count: CountTokens,
) -> dict[int, tuple[Item, int]]:
    """The tool outputs of the newest group (`spans[-1]`) truncated head and tail, each naming
    the fact that holds it whole, so that the group fits `room`, and fits beside the groups
    back to the latest user message too where that leaves each output `MIN_OUTPUT_TOKENS`.
    Empty when even `room` cannot hold the group's calls and the least of each output."""
    newest = spans[-1]
    outputs = [
        k
        for k in newest
        if item_type(history[k].item) in OUTPUT_TYPES
        and isinstance(history[k].item.get("output"), str | list)
    ]
    fixed = sum(tokens[k] for k in newest if k not in outputs)
    users = [
        n
        for n, span in enumerate(spans[:-1])
        if any(
            item_type(history[k].item) == "message" and history[k].item.get("role") == "user"
            for k in span
        )
    ]
    between = sum(tokens[k] for span in spans[users[-1] : -1] for k in span) if users else 0
    floor = fixed + MIN_OUTPUT_TOKENS * len(outputs)
    target = room - between if room - between >= floor else room
    shrunk = shrink_outputs(
        [
            (
                history[k].item["output"],
                tokens[k],
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


@dataclass(frozen=True)
class HistoryFit:
    """Which of the history an assembly keeps, and the assembly's totals with it counted."""

    items: Sequence[Item]
    """Each entry's item as shown: the entry's own, or a new item with truncated outputs."""
    tokens: Sequence[int]
    """The tokens of each item as shown."""
    start: int
    """The first entry kept (the history's length when none is)."""
    fitting_start: int
    """The first entry the budget could keep; those from it up to `start` are `history_cut`."""
    reason: DropReason | None
    """Why the entries before `fitting_start` were dropped (None when none were)."""
    total_tokens: int
    counted_items: int
    """The items counted toward `max_items`: the candidates', and the history's when it counts."""

    def dropped(self, k: int) -> DropReason | None:
        """Why the k-th entry is not shown; None when it is."""
        if k >= self.start:
            return None
        return self.reason if k < self.fitting_start else "history_cut"

    def form(self, k: int, entry: HistoryEntry) -> str:
        """The form the k-th entry (`entry`) is in: raw, or truncated where its outputs were
        cut to fit."""
        return RAW_FORM if self.items[k] is entry.item else TRUNCATED_FORM


def fit_history(
    inp: AssemblyInput, *, total_tokens: int, counted_items: int, count: CountTokens
) -> HistoryFit:
    """The history of `inp` fitted to what is left after the selected candidates' `total_tokens`
    and `counted_items`; see the module doc."""
    budget = inp.budget
    history_tokens = [
        entry.tokens if entry.tokens is not None else item_tokens(entry.item, count)
        for entry in inp.history
    ]
    history_items = [entry.item for entry in inp.history]
    history_start = len(inp.history)
    history_reason: DropReason | None = None
    cuts = history_cuts(history_items)
    spans = _groups(cuts, len(history_items))
    for newest, span in enumerate(reversed(spans), start=1):
        span_tokens = sum(history_tokens[k] for k in span)
        if inp.history_counts_toward_max_items and not fits(
            len(span), budget.max_items, used=counted_items
        ):
            history_reason = "max_items"
            break
        if (
            newest == 1
            and inp.keep_newest
            and budget.max_tokens is not None
            and not fits(span_tokens, budget.max_tokens, used=total_tokens)
        ):
            shrunk = _shrink_newest(
                inp.history,
                history_tokens,
                spans,
                room=budget.max_tokens - total_tokens,
                count=count,
            )
            for k, (cut_item, cut_tokens) in shrunk.items():
                history_items[k] = cut_item
                history_tokens[k] = cut_tokens
            span_tokens = sum(history_tokens[k] for k in span)
        if not fits(span_tokens, budget.max_tokens, used=total_tokens):
            history_reason = "max_tokens"
            break
        history_start = span.start
        total_tokens += span_tokens
        if inp.history_counts_toward_max_items:
            counted_items += len(span)
    fitting_start = history_start
    if history_start > 0 and inp.history_cut_step is not None:
        history_start = stable_history_start(
            cuts,
            history_tokens,
            fitting_start=fitting_start,
            step=inp.history_cut_step,
        )
        cut = range(fitting_start, history_start)
        total_tokens -= sum(history_tokens[k] for k in cut)
        if inp.history_counts_toward_max_items:
            counted_items -= len(cut)
    return HistoryFit(
        items=history_items,
        tokens=history_tokens,
        start=history_start,
        fitting_start=fitting_start,
        reason=history_reason,
        total_tokens=total_tokens,
        counted_items=counted_items,
    )
