"""truncate, summary, handoff and notes: the older units dropped or recorded, the newest kept.

Invariants: the body is cut only between `history_cuts`, so whole units are kept or dropped and
pairing holds; the invariants and the newest turn (truncate: the newest units that fit) are
always kept; a record gets at least `1 / _RECORD_FLOOR_SHARE` of the target; older units come
back only as the loss check needs them (their other outputs cleared or cut to excerpts), and a
draft that still misses a fact falls back to clear_tool_results.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.domain.compaction.clearing import clear, cleared_output, is_clearable
from app.domain.compaction.context import Context, over_target
from app.domain.compaction.extraction import request_needle, seq_range
from app.domain.compaction.fitting import (
    excerpt,
    shrink_kept,
    shrunk_outputs,
    without_written_content,
)
from app.domain.compaction.loss_check import RequiredFact, missing_facts, required_facts
from app.domain.compaction.model import DECLARATIONS, CompactionResult, ProductKind
from app.domain.compaction.product import render_product
from app.domain.compaction.record import write_record
from app.domain.history import HistoryEntry, history_cuts
from app.domain.items import OUTPUT_TYPES, item_type, visible_text

_RECORD_FLOOR_SHARE = 2
"""A compaction record may always take half the target: what it names per token (its trail
above all) the model goes on to use more often than the oldest turns it would leave room for."""
_LOSSY_KEEPS = (
    "the invariants and the newest turn are always kept (its outputs cut to head and tail as far"
    " as they go), a record no smaller than its floor, older turns only for the facts the loss"
    " check needs (goal, latest request, touched files, latest error)"
)


def _tail_start(
    cuts: Sequence[int], *, suffix_sizes: Sequence[int], budget: int, prefer: int, keep: int
) -> int:
    """The earliest cut at or after `prefer` whose suffix fits `budget`, keeping at least the
    suffix that starts at cut `keep`."""
    fitting = [c for c in cuts if min(prefer, keep) <= c <= keep and suffix_sizes[c] <= budget]
    return fitting[0] if fitting else keep


@dataclass(frozen=True)
class _Covering:
    """A lossy strategy's draft: what it covers, keeps, and re-loads for the loss check."""

    head: tuple[HistoryEntry, ...]
    covered: tuple[HistoryEntry, ...]
    tail: tuple[HistoryEntry, ...]
    reloaded: dict[int, tuple[tuple[HistoryEntry, ...], str]]
    facts: list[RequiredFact]
    missing: list[RequiredFact]

    def history(self) -> tuple[HistoryEntry, ...]:
        middle = [entry for a in sorted(self.reloaded) for entry in self.reloaded[a][0]]
        return (*self.head, *middle, *self.tail)


def _shown(head: Sequence[HistoryEntry], request: HistoryEntry) -> bool:
    """Whether `head` (the invariants, an earlier record) already shows the user's request:
    a task pinned as the goal is not kept a second time."""
    needle = request_needle(visible_text(request.item))
    return bool(needle) and any(needle in visible_text(entry.item) for entry in head)


def lossy(ctx: Context, *, kind: ProductKind | None) -> CompactionResult:
    """truncate (no `kind` of product), summary, handoff and notes: record or drop the older
    units, keep the newest ones."""
    inp, body = ctx.inp, ctx.body
    params = inp.params
    truncating = kind is None
    target = params.target_tokens if params.target_tokens is not None else ctx.tokens_before // 2
    if target >= ctx.tokens_before:
        return ctx.noop(f"it already fits the target of {target} tokens")
    cuts = history_cuts([entry.item for entry in body])
    suffix = [0] * (len(body) + 1)
    for position in reversed(range(len(body))):
        suffix[position] = suffix[position + 1] + ctx.size(visible_text(body[position].item))
    keep = max(c for c in cuts if c <= max(0, len(body) - params.keep_recent))
    users = [
        position
        for position, entry in enumerate(body)
        if item_type(entry.item) == "message" and entry.item.get("role") == "user"
    ]
    # truncate keeps as much as fits; the others keep the newest turn and record the rest.
    if truncating:
        prefer = 0
    elif users:
        prefer = max(c for c in cuts if c <= users[-1])
    else:
        prefer = len(body)
    head_size = ctx.total(ctx.invariants) + (ctx.total(ctx.products) if truncating else 0)
    budget = target - head_size
    start = _tail_start(cuts, suffix_sizes=suffix, budget=budget, prefer=prefer, keep=keep)
    if seq_range(body[:start]) is None:
        if suffix[start] > budget:
            return shrink_kept(ctx, head_size=head_size, target=target)
        return ctx.noop("every entry belongs to the newest turns it keeps")
    head: tuple[HistoryEntry, ...] = (*ctx.invariants, *ctx.products)
    product = None
    if kind is not None:
        # The record gets what the kept turns leave of the target, and at least a share of it
        # whatever they leave: a record squeezed to nothing would compact again at once.
        record_budget = max(budget - suffix[start], target // _RECORD_FLOOR_SHARE)
        product = write_record(ctx, body[:start], kind=kind, budget=record_budget)
        record = render_product(product)
        # The record's size is known only once it is written: make room for it once.
        record_size = ctx.size(visible_text(record))
        if head_size + record_size + suffix[start] > target:
            later = _tail_start(
                cuts, suffix_sizes=suffix, budget=budget - record_size, prefer=prefer, keep=keep
            )
            if later != start:
                start = later
                product = write_record(ctx, body[:later], kind=kind, budget=record_budget)
                record = render_product(product)
        head = (*ctx.invariants, HistoryEntry(None, record, verbatim=False))

    def covering(start: int) -> _Covering:
        """The units before `start` dropped or recorded, the ones the loss check re-loads."""
        covered, tail = body[:start], body[start:]
        units = [(a, b) for a, b in itertools.pairwise(cuts) if b <= start]
        reloaded: dict[int, tuple[tuple[HistoryEntry, ...], str]] = {}
        if truncating and users and users[-1] < start and not _shown(head, body[users[-1]]):
            a, b = next(unit for unit in units if unit[0] <= users[-1] < unit[1])
            reloaded[a] = (body[a:b], "latest user request")
        draft = _Covering(head, covered, tail, reloaded, [], [])
        facts = required_facts(covered, new_history=draft.history(), goal=inp.goal)
        missing = missing_facts(facts, draft.history())
        for fact in missing:
            if fact.needle in "\n".join(
                visible_text(e.item) for a in reloaded for e in reloaded[a][0]
            ):
                continue
            options: list[tuple[int, int, int, tuple[HistoryEntry, ...]]] = []
            for a, b in units:
                if a in reloaded or not any(fact.needle in visible_text(e.item) for e in body[a:b]):
                    continue
                # An output is kept whole only for a fact no call or message of its unit shows,
                # so that the unit stays paired and small.
                shown = "\n".join(
                    visible_text(e.item) for e in body[a:b] if item_type(e.item) not in OUTPUT_TYPES
                )
                needles = [f.needle for f in missing if f.needle not in shown]
                unit = tuple(
                    (
                        excerpt(ctx, e, needles)
                        if any(n in visible_text(e.item) for n in needles)
                        else cleared_output(e, size=ctx.size(visible_text(e.item)), call_seq=None)
                    )
                    if is_clearable(e)
                    else without_written_content(ctx, e, [f.needle for f in missing])
                    for e in body[a:b]
                )
                options.append((ctx.total(unit), -a, a, unit))
            if options:
                # The cheapest unit carrying the fact; the newest of equally cheap ones.
                _, _, a, unit = min(options, key=lambda option: option[:2])
                reloaded[a] = (unit, f"loss check: {fact.label}")
        return _Covering(head, covered, tail, reloaded, facts, missing)

    drafted = covering(start)
    # truncate keeps what fits: what the loss check re-loads pushes the cut later.
    while truncating and (over := ctx.total(drafted.history()) - target) > 0:
        later = _tail_start(
            cuts, suffix_sizes=suffix, budget=suffix[start] - over, prefer=start, keep=keep
        )
        if later <= start:
            break
        start = later
        drafted = covering(start)
    covered, tail, reloaded = drafted.covered, drafted.tail, drafted.reloaded
    facts, missing = drafted.facts, drafted.missing

    def assemble() -> tuple[HistoryEntry, ...]:
        return replace(drafted, tail=tail).history()

    history = assemble()
    if missing and missing_facts(facts, history):
        fallback = clear(ctx)
        return replace(
            fallback,
            strategy="clear_tool_results",
            loss_missing=tuple(fact.label for fact in missing),
            fell_back=True,
        )
    if (over := ctx.total(history) - target) > 0:
        # The newest turn is kept whatever its size: its outputs go head and tail, each naming
        # the fact that holds it whole, as far as the loss check allows.
        shrunk = shrunk_outputs(ctx, tail, budget=ctx.total(tail) - over, at_least=True)
        # What the loss check asks of the covered range it asks of the cut turn too.
        needed = [*facts, *required_facts(tail, new_history=tail, goal=inp.goal)]
        if shrunk is not None and not missing_facts(
            needed, replace(drafted, tail=shrunk).history()
        ):
            tail = shrunk
            history = assemble()
    kept_reason = "newest items within the target" if truncating else "newest turn"
    working_set = [
        (entry.seq, reason)
        for entries, reason in [*(reloaded[a] for a in sorted(reloaded)), (tail, kept_reason)]
        for entry in entries
        if entry.seq is not None and entry.verbatim
    ]
    return CompactionResult(
        strategy=inp.strategy,
        declares={key: list(value) for key, value in DECLARATIONS[inp.strategy].items()},
        tokens_before=ctx.tokens_before,
        tokens_after=ctx.total(history),
        history=history,
        summary=product.summary if product else None,
        notes=product.notes if product else None,
        working_set=tuple(working_set),
        loss_missing=tuple(fact.label for fact in missing),
        fell_back=False,
        covered=seq_range(covered),
        is_noop=False,
        handoff=product.handoff if product else None,
        pinned_notes=product.pinned if product else (),
        over_target=over_target(
            ctx,
            target=target,
            parts=(
                ("the invariants", ctx.invariants),
                ("the earlier record" if truncating else "the record", head[len(ctx.invariants) :]),
                (
                    "the older turns the loss check kept",
                    [entry for a in reloaded for entry in reloaded[a][0]],
                ),
                ("the newest turn", tail),
            ),
            keeps=_LOSSY_KEEPS,
        ),
    )
