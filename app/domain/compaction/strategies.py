"""Planning: `plan_compaction` and the strategies behind it.

The guarantees are the package's (see `app.domain.compaction`). How they are kept here: every
strategy works on the body (the history without products and re-anchored invariants) and
rebuilds the history as invariants, product, kept body; lossy strategies keep or drop whole
units between `history_cuts` and re-load covered units the loss check needs; the result is
checked for pairing before it is returned.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import assert_never

from app.domain.compaction.extraction import (
    hand_off,
    identifiers,
    merged,
    scan_entries,
    seq_range,
    summarize_builtin,
    take_notes,
)
from app.domain.compaction.loss_check import (
    RequiredFact,
    find_lost_identifiers,
    missing_facts,
    required_facts,
)
from app.domain.compaction.model import (
    DECLARATIONS,
    CompactionBroken,
    CompactionInput,
    CompactionResult,
    ProductKind,
    Trail,
)
from app.domain.compaction.product import (
    Product,
    fit_product,
    is_compaction_product,
    read_product,
    render_product,
)
from app.domain.compaction.trail import NameUse, build_trail, name_uses, trail_entries
from app.domain.history import HistoryEntry, history_cuts
from app.domain.items import CALL_TYPES, OUTPUT_TYPES, CountTokens, Item, item_type, visible_text
from app.domain.normalize import find_pairing_violations
from app.domain.truncation import shrink_outputs

_CLEARED_PREFIX = "[tool output cleared by contextd"
_GOAL_HEADING_SECTION = re.compile(
    r"^#{1,6}[ \t]*(?:the |original |pinned |user'?s? )?goal\b.*?(?=^#{1,6}[ \t]|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_RECORD_FLOOR_SHARE = 2
"""A compaction record may always take half the target: what it names per token (its trail
above all) the model goes on to use more often than the oldest turns it would leave room for."""
_TRAIL_SHARE = 2
"""The name trail may take up to half a record's budget from its other lists."""
_GOAL_LINE = re.compile(r"^[ \t]*[*_]*goal[*_]*[ \t]*:.*(?:\n|\Z)", re.IGNORECASE | re.MULTILINE)


def _tail_start(
    cuts: Sequence[int], *, suffix_sizes: Sequence[int], budget: int, prefer: int, keep: int
) -> int:
    """The earliest cut at or after `prefer` whose suffix fits `budget`, keeping at least the
    suffix that starts at cut `keep`."""
    fitting = [c for c in cuts if min(prefer, keep) <= c <= keep and suffix_sizes[c] <= budget]
    return fitting[0] if fitting else keep


def _cleared_output(entry: HistoryEntry, *, size: int, call_seq: int | None) -> HistoryEntry:
    where = f"fact seq {entry.seq}" if entry.seq is not None else "the session log"
    call = f"; its call is fact seq {call_seq}" if call_seq is not None else ""
    text = f"{_CLEARED_PREFIX} to save context ({size} tokens); the full output is {where}{call}]"
    return HistoryEntry(entry.seq, {**entry.item, "output": text}, verbatim=False)


_EXCERPT_LINE_CHARS = 300


def _excerpt(ctx: _Context, entry: HistoryEntry, needles: Sequence[str]) -> HistoryEntry:
    """A tool output the loss check needs for `needles`, cut to the lines that show them (each
    clipped around them) and naming the fact that holds it whole; the output whole when its
    lines do not show every needle it holds, or the cut would not be smaller."""
    output = entry.item.get("output")
    if not isinstance(output, str):
        return entry
    held = [needle for needle in needles if needle in output]
    lines = []
    for line in output.splitlines():
        if any(needle in line for needle in held):
            start = min(line.find(n) for n in held if n in line)
            lines.append(line[max(0, start - 60) : start + _EXCERPT_LINE_CHARS].strip())
    text = (
        f"[contextd: the lines of this output the session keeps in view; the full output is"
        f" fact seq {entry.seq}]\n" + "\n".join(lines)
    )
    if not all(needle in text for needle in held) or ctx.size(text) >= ctx.size(output):
        return entry
    return HistoryEntry(entry.seq, {**entry.item, "output": text}, verbatim=False)


def is_cleared_output(item: Item) -> bool:
    """Whether `item` is a tool output clear_tool_results already replaced by a placeholder."""
    output = item.get("output")
    return isinstance(output, str) and output.startswith(_CLEARED_PREFIX)


def _is_clearable(entry: HistoryEntry) -> bool:
    return (
        item_type(entry.item) in OUTPUT_TYPES
        and entry.seq is not None
        and not is_cleared_output(entry.item)
    )


@dataclass(frozen=True)
class _Context:
    """What every strategy starts from."""

    inp: CompactionInput
    size: CountTokens
    """Tokens of one entry's visible text."""
    tokens_before: int
    invariants: tuple[HistoryEntry, ...]
    products: tuple[HistoryEntry, ...]
    body: tuple[HistoryEntry, ...]
    """The history without products and re-anchored invariants."""
    previous: Product | None

    def noop(self, why: str) -> CompactionResult:
        """Nothing to do; `why` says so in the declaration, for the engineer reading it (and
        in `over_target` when the history is over the target)."""
        target = self.inp.params.target_tokens
        return CompactionResult(
            strategy=self.inp.strategy,
            declares={"drops": [], "keeps": [f"the active history, unchanged: {why}"]},
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_before,
            history=self.inp.history,
            summary=None,
            notes=None,
            working_set=(),
            loss_missing=(),
            fell_back=False,
            covered=None,
            is_noop=True,
            over_target=why if target is not None and self.tokens_before > target else None,
        )

    def total(self, entries: Sequence[HistoryEntry]) -> int:
        return sum(self.size(visible_text(entry.item)) for entry in entries)


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


def split(inp: CompactionInput) -> tuple[tuple[HistoryEntry, ...], tuple[HistoryEntry, ...]]:
    """(products, body) of the history; re-anchored invariants in front of a product go."""
    history = inp.history
    first = next((i for i, e in enumerate(history) if is_compaction_product(e.item)), None)
    anchored = 0
    if first is not None and all(
        e.seq is None and e.item.get("role") == "developer" for e in history[:first]
    ):
        anchored = first
    products = tuple(e for e in history if is_compaction_product(e.item))
    body = tuple(
        e
        for e in history[anchored:]
        if not is_compaction_product(e.item) and e.item not in inp.invariants
    )
    return products, body


def _clear(ctx: _Context) -> CompactionResult:
    params = ctx.inp.params
    names: dict[str, tuple[str, int, int | None]] = {}
    for position, entry in enumerate(ctx.body):
        if item_type(entry.item) in CALL_TYPES:
            names[str(entry.item.get("call_id"))] = (
                str(entry.item.get("name", "local_shell")),
                position,
                entry.seq,
            )
    outputs = [p for p, e in enumerate(ctx.body) if item_type(e.item) in OUTPUT_TYPES]
    kept = set(outputs[-params.keep_recent :]) if params.keep_recent > 0 else set()
    body = list(ctx.body)
    freed = 0
    cleared: list[int] = []
    # Oldest first, and only as many as it takes to reach the target: what stays is read as is,
    # and the bytes before the first cleared output stay a reusable prefix.
    target = params.target_tokens
    unmasked = ctx.total((*ctx.invariants, *ctx.products, *body)) if target is not None else 0
    for position in outputs:
        if target is not None and unmasked - freed <= target:
            break
        entry = body[position]
        name, call_position, call_seq = names.get(str(entry.item.get("call_id")), ("", -1, None))
        if position in kept or name in params.exclude_tools or not _is_clearable(entry):
            continue
        call = body[call_position] if call_position >= 0 else None
        new_call = None
        if params.clear_tool_inputs and call is not None:
            match call.item.get("type"):
                case "function_call":
                    new_call = HistoryEntry(call.seq, {**call.item, "arguments": "{}"}, False)
                case "custom_tool_call":
                    text = (
                        f"[tool input cleared by contextd; the full input is fact seq {call.seq}]"
                    )
                    new_call = HistoryEntry(call.seq, {**call.item, "input": text}, False)
                case _:
                    pass  # a shell action is the call itself: it is never blanked
        size = ctx.size(visible_text(entry.item))
        masked = _cleared_output(
            entry, size=size, call_seq=call_seq if new_call is not None else None
        )
        gain = size - ctx.size(visible_text(masked.item))
        if call is not None and new_call is not None:
            gain += ctx.size(visible_text(call.item)) - ctx.size(visible_text(new_call.item))
        if gain > 0:
            body[position] = masked
            if new_call is not None:
                body[call_position] = new_call
            freed += gain
            cleared.append(position)
    if not cleared and target is not None and unmasked <= target:
        return ctx.noop(f"it already fits the target of {target} tokens")
    if not cleared:
        return ctx.noop(
            f"no tool output outside the newest {params.keep_recent} and the excluded tools "
            "has a body to clear"
        )
    if freed < params.clear_at_least_tokens:
        return ctx.noop(
            f"clearing would free {freed} tokens, fewer than clear_at_least_tokens "
            f"({params.clear_at_least_tokens})"
        )
    history = (*ctx.invariants, *ctx.products, *body)
    return CompactionResult(
        strategy="clear_tool_results",
        declares={key: list(value) for key, value in DECLARATIONS["clear_tool_results"].items()},
        tokens_before=ctx.tokens_before,
        tokens_after=ctx.total(history),
        history=history,
        summary=None,
        notes=None,
        working_set=(),
        loss_missing=(),
        fell_back=False,
        covered=seq_range([ctx.body[p] for p in cleared]),
        is_noop=False,
        over_target=_over_target(
            ctx,
            target=target,
            parts=(
                ("the invariants", ctx.invariants),
                ("the earlier record", ctx.products),
                ("the calls, messages and kept outputs", body),
            ),
            keeps=_CLEARING_KEEPS,
        ),
    )


def _product_for(ctx: _Context, covered: Sequence[HistoryEntry], *, kind: ProductKind) -> Product:
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


def _record(
    ctx: _Context, covered: Sequence[HistoryEntry], *, kind: ProductKind, budget: int
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
    return record


def _lossy(ctx: _Context, *, kind: ProductKind | None) -> CompactionResult:
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
            return _shrink_kept(ctx, head_size=head_size, target=target)
        return ctx.noop("every entry belongs to the newest turns it keeps")
    head: tuple[HistoryEntry, ...] = (*ctx.invariants, *ctx.products)
    product = None
    if kind is not None:
        # The record gets what the kept turns leave of the target, and at least a share of it
        # whatever they leave: a record squeezed to nothing would compact again at once.
        record_budget = max(budget - suffix[start], target // _RECORD_FLOOR_SHARE)
        product = _record(ctx, body[:start], kind=kind, budget=record_budget)
        record = render_product(product)
        # The record's size is known only once it is written: make room for it once.
        record_size = ctx.size(visible_text(record))
        if head_size + record_size + suffix[start] > target:
            later = _tail_start(
                cuts, suffix_sizes=suffix, budget=budget - record_size, prefer=prefer, keep=keep
            )
            if later != start:
                start = later
                product = _record(ctx, body[:later], kind=kind, budget=record_budget)
                record = render_product(product)
        head = (*ctx.invariants, HistoryEntry(None, record, verbatim=False))

    def covering(start: int) -> _Covering:
        """The units before `start` dropped or recorded, the ones the loss check re-loads."""
        covered, tail = body[:start], body[start:]
        units = [(a, b) for a, b in itertools.pairwise(cuts) if b <= start]
        reloaded: dict[int, tuple[tuple[HistoryEntry, ...], str]] = {}
        if truncating and users and users[-1] < start:
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
                        _excerpt(ctx, e, needles)
                        if any(n in visible_text(e.item) for n in needles)
                        else _cleared_output(e, size=ctx.size(visible_text(e.item)), call_seq=None)
                    )
                    if _is_clearable(e)
                    else e
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
        fallback = _clear(ctx)
        return replace(
            fallback,
            strategy="clear_tool_results",
            loss_missing=tuple(fact.label for fact in missing),
            fell_back=True,
        )
    if (over := ctx.total(history) - target) > 0:
        # The newest turn is kept whatever its size: its outputs go head and tail, each naming
        # the fact that holds it whole, as far as the loss check allows.
        shrunk = _shrunk_outputs(ctx, tail, budget=ctx.total(tail) - over)
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
        over_target=_over_target(
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
        ),
    )


_LOSSY_KEEPS = (
    "the invariants and the newest turn are always kept (its outputs cut to head and tail as far"
    " as they go), a record no smaller than its floor, older turns only for the facts the loss"
    " check needs (goal, latest request, touched files, latest error)"
)
_CLEARING_KEEPS = (
    "clear_tool_results keeps every call and message and the newest keep_recent outputs (summary"
    " or truncate go further)"
)


def _over_target(
    ctx: _Context,
    *,
    target: int | None,
    parts: Sequence[tuple[str, Sequence[HistoryEntry]]],
    keeps: str = _LOSSY_KEEPS,
) -> str | None:
    """Why a compacted history is over `target`, what each part of it takes; None within."""
    sizes = [(label, ctx.total(entries)) for label, entries in parts if entries]
    total = sum(size for _, size in sizes)
    if target is None or total <= target:
        return None
    taken = ", ".join(f"{label} {size}" for label, size in sizes)
    return f"{total - target} tokens over the target of {target}: {taken} tokens; {keeps}"


def _shrunk_outputs(
    ctx: _Context, entries: Sequence[HistoryEntry], *, budget: int
) -> tuple[HistoryEntry, ...] | None:
    """`entries` with their tool outputs truncated head and tail so that all fit `budget`, each
    naming the fact that holds it whole; None when that cannot reach it."""
    outputs = [
        k
        for k, entry in enumerate(entries)
        if _is_clearable(entry) and isinstance(entry.item.get("output"), str | list)
    ]
    fixed = ctx.total([entry for k, entry in enumerate(entries) if k not in outputs])
    shrunk = shrink_outputs(
        [
            (
                entries[k].item["output"],
                ctx.size(visible_text(entries[k].item)),
                f"fact seq {entries[k].seq}",
            )
            for k in outputs
        ],
        budget=budget - fixed,
        count_tokens=ctx.size,
    )
    if not outputs or shrunk is None:
        return None
    kept = list(entries)
    for k, output in zip(outputs, shrunk, strict=True):
        if output is not kept[k].item["output"]:
            kept[k] = HistoryEntry(kept[k].seq, {**kept[k].item, "output": output}, verbatim=False)
    return tuple(kept)


def _shrink_kept(ctx: _Context, *, head_size: int, target: int) -> CompactionResult:
    """The newest turns alone are over the target: their tool outputs, truncated head and tail
    to reach it, each naming the fact that holds it whole (nothing else is left to compact)."""
    shrunk = _shrunk_outputs(ctx, ctx.body, budget=target - head_size)
    if shrunk is None:
        return ctx.noop(
            f"the newest turns' calls and messages alone are over the target of {target} tokens"
        )
    changed = [entry for entry in shrunk if not entry.verbatim and entry not in ctx.body]
    history = (*ctx.invariants, *ctx.products, *shrunk)
    return CompactionResult(
        strategy=ctx.inp.strategy,
        declares={
            "drops": ["the middle of the newest tool outputs, over the target on their own"],
            "keeps": [
                "every item; the newest tool outputs as head and tail, each naming the fact"
                " seq that holds it whole"
            ],
        },
        tokens_before=ctx.tokens_before,
        tokens_after=ctx.total(history),
        history=history,
        # The earlier record stays as it is: what it carries is what the history carries.
        summary=ctx.previous.summary if ctx.previous else None,
        notes=ctx.previous.notes if ctx.previous else None,
        working_set=tuple(
            (entry.seq, "newest turn")
            for entry in shrunk
            if entry.seq is not None and entry.verbatim
        ),
        loss_missing=(),
        fell_back=False,
        covered=seq_range(changed),
        is_noop=not changed,
        handoff=ctx.previous.handoff if ctx.previous else None,
        pinned_notes=ctx.previous.pinned if ctx.previous else (),
    )


def plan_compaction(inp: CompactionInput, *, count_tokens: CountTokens) -> CompactionResult:
    """Compact `inp.history` under `inp.strategy`; see the package docstring for the guarantees.

    Raises `CompactionBroken` when the new history would break call/output pairing (the input
    history must satisfy it: normalize first).
    """
    size = functools.cache(count_tokens)
    products, body = split(inp)
    ctx = _Context(
        inp=inp,
        size=size,
        tokens_before=sum(size(visible_text(entry.item)) for entry in inp.history),
        invariants=tuple(HistoryEntry(None, item, verbatim=False) for item in inp.invariants),
        products=products,
        body=body,
        previous=read_product(products[-1].item) if products else None,
    )
    if not body:
        return ctx.noop("nothing past the invariants and earlier records to compact")
    match inp.strategy:
        case "clear_tool_results":
            result = _clear(ctx)
        case "truncate":
            result = _lossy(ctx, kind=None)
        case "summary" | "handoff" | "notes" as kind:
            result = _lossy(ctx, kind=kind)
        case _:
            assert_never(inp.strategy)
    if not result.is_noop and (
        violations := find_pairing_violations([entry.item for entry in result.history])
    ):
        raise CompactionBroken(
            f"{result.strategy} would break call/output pairing; nothing was compacted",
            details=violations,
        )
    target = inp.params.target_tokens
    if target is None and inp.strategy != "clear_tool_results":
        target = ctx.tokens_before // 2
    result = replace(result, target_tokens=target)
    if result.is_noop or result.covered is None:
        return result
    first, last = result.covered
    covered = [e for e in body if e.seq is not None and first <= e.seq <= last]
    return replace(
        result,
        identifiers_found=len(identifiers(covered)),
        identifiers_lost=find_lost_identifiers(covered=covered, new_history=result.history),
    )
