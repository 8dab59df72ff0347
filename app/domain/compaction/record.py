"""The record a summary, handoff or notes strategy writes of the units it covers.

Invariants: the record is merged with the earlier one (carried as the previous summary, notes,
handoff, pins and trail), so at most one record stays; the pinned goal is its only goal, and a
goal the invariants already show is named there rather than carried twice; the record is fitted
to its budget, its name trail taking what the rest leaves and at most `_TRAIL_SHARE` of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from app.domain.compaction.context import Context
from app.domain.compaction.extraction import (
    hand_off,
    merged,
    scan_entries,
    seq_range,
    summarize_builtin,
    take_notes,
)
from app.domain.compaction.model import ProductKind, Trail
from app.domain.compaction.product import Product, fit_product, render_product
from app.domain.compaction.trail import NameUse, build_trail, name_uses, trail_entries
from app.domain.history import HistoryEntry
from app.domain.items import visible_text

_GOAL_HEADING_SECTION = re.compile(
    r"^#{1,6}[ \t]*(?:the |original |pinned |user'?s? )?goal\b.*?(?=^#{1,6}[ \t]|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_TRAIL_SHARE = 2
"""The name trail may take up to half a record's budget from its other lists."""
_GOAL_LINE = re.compile(r"^[ \t]*[*_]*goal[*_]*[ \t]*:.*(?:\n|\Z)", re.IGNORECASE | re.MULTILINE)


def _product_for(ctx: Context, covered: Sequence[HistoryEntry], *, kind: ProductKind) -> Product:
    """The record of `covered` the strategy writes, merged with the earlier record."""
    inp, before = ctx.inp, ctx.previous
    previous_summary = inp.previous_summary or (before.summary if before else None)
    previous_notes = inp.previous_notes or (before.notes if before else None)
    goal = inp.goal
    if goal is None:
        goal = previous_summary.goal if previous_summary else before.goal if before else None
    # The pinned goal is the only goal, also in a summary carried over unchanged.
    summary = replace(previous_summary, goal=goal) if previous_summary else None
    notes, handoff = previous_notes, before.handoff if before else None
    scan = scan_entries(covered)
    if kind in ("summary", "handoff"):
        summary = summarize_builtin(covered, goal=goal, previous=previous_summary)
        if inp.params.summarizer != "builtin" and inp.summary_text:
            # The pinned goal is the only goal: whatever goal the text states is taken out.
            narrative = _GOAL_LINE.sub("", _GOAL_HEADING_SECTION.sub("", inp.summary_text))
            summary = replace(summary, narrative=narrative.strip() or None)
    if kind == "handoff":
        handoff = hand_off(scan, previous=handoff)
    if kind == "notes":
        notes = take_notes(scan, goal=goal, previous=previous_notes)
    span = seq_range(covered)
    first = before.source_range[0] if before and before.source_range[0] is not None else None
    # A goal the invariants pin above the record is named there, not carried a second time.
    goal_pinned = goal is not None and any(goal in visible_text(i) for i in inp.invariants)
    if goal_pinned:
        goal = None
        summary = replace(summary, goal=None) if summary else None
    return Product(
        kind=kind,
        goal=goal,
        summary=summary,
        notes=notes,
        handoff=handoff,
        pinned=merged(before.pinned if before else (), inp.pinned_notes, cap=None),
        source_range=(first if first is not None else span and span[0], span and span[1]),
        goal_pinned=goal_pinned,
        omitted=before.omitted if before else (),
    )


def write_record(
    ctx: Context, covered: Sequence[HistoryEntry], *, kind: ProductKind, budget: int
) -> Product:
    """The record of `covered`, within about `budget` tokens: its name trail gets what the rest
    leaves, and may take up to `_TRAIL_SHARE` of the budget from the rest's lists."""
    product = _product_for(ctx, covered, kind=kind)
    previous = ctx.previous.trail if ctx.previous is not None else None
    uses = name_uses(covered, previous)

    def trail_within(shown: Product, trail_budget: int, *, of: dict[str, NameUse]) -> Trail:
        text = visible_text(render_product(shown)) + "\n" + (ctx.inp.goal or "")
        return build_trail(of, previous=previous, shown=text, budget=trail_budget, count=ctx.size)

    # What the trail may take from the other lists is what the names the agent wrote (or two
    # outputs showed) need; names one output showed only fill what is left.
    wanted = trail_within(
        product, budget // _TRAIL_SHARE, of={n: use for n, use in uses.items() if use.uses >= 0}
    )
    reserve = ctx.size("\n".join(trail_entries(wanted))) if wanted.groups else 0
    fitted = fit_product(product, budget=budget - reserve, count=ctx.size)
    left = budget - ctx.size(visible_text(render_product(fitted)))
    record = replace(fitted, trail=trail_within(fitted, left, of=uses))
    # The trail's cost is estimated name by name: measured over, it gives back the excess.
    for _ in range(3):
        over = ctx.size(visible_text(render_product(record))) - budget
        if over <= 0 or record.trail is None or not record.trail.groups:
            break
        left -= over
        record = replace(fitted, trail=trail_within(fitted, left, of=uses))
    if record.trail is not None and not record.trail.groups:
        # A trail with no room for a name would only say where names were last used, which
        # the record's range says already.
        record = replace(record, trail=None)
    return record
