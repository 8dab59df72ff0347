"""Tool outputs cut down to fit: head and tail when the newest turns are over the target, an excerpt
when the loss check re-loads an older output for a few of its lines; and the content an older call
wrote, when the loss check re-loads the call for its path.

Invariants: only an output that is clearable (not cleared yet, with a fact seq) is cut, and every
cut output names the fact seq that holds it whole; of a call re-loaded by the loss check, only the
long text values of its arguments (what it wrote) are ever cut, head and tail, the arguments staying
the same JSON object with its short values (the path) whole, the cut naming the fact seq and keeping
every needle the call showed; messages and call_ids are never touched, so pairing holds; a cut is
used only when it is smaller and still shows what it was cut for, otherwise the item stays as it
was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.domain.compaction.clearing import is_clearable
from app.domain.compaction.context import Context
from app.domain.compaction.extraction import seq_range
from app.domain.compaction.model import CompactionResult
from app.domain.history import HistoryEntry
from app.domain.items import item_type, visible_text
from app.domain.truncation import MIN_OUTPUT_TOKENS, shrink_outputs

_EXCERPT_LINE_CHARS = 300
_WRITTEN_CHARS = 600
"""Content a re-loaded call wrote is kept up to this many characters, half head, half tail."""


def excerpt(ctx: Context, entry: HistoryEntry, needles: Sequence[str]) -> HistoryEntry:
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


def without_written_content(
    ctx: Context, entry: HistoryEntry, needles: Sequence[str]
) -> HistoryEntry:
    """A function call the loss check re-loads, with the long text values of its arguments
    (over `_WRITTEN_CHARS`: the content it wrote into a file, a heredoc in a shell command) cut
    head and tail, naming the fact that holds the call whole; the call as it was when its
    arguments are no JSON object, nothing is that long, or the cut would lose a needle it shows
    or not be smaller."""
    arguments = entry.item.get("arguments")
    if item_type(entry.item) != "function_call" or not isinstance(arguments, str):
        return entry
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return entry
    if not isinstance(parsed, dict):
        return entry
    half = _WRITTEN_CHARS // 2
    cut = {
        key: (
            f"{value[:half]}[… {len(value) - 2 * half} characters written; the whole call is"
            f" fact seq {entry.seq} …]{value[-half:]}"
            if isinstance(value, str) and len(value) > _WRITTEN_CHARS
            else value
        )
        for key, value in parsed.items()
    }
    if cut == parsed:
        return entry
    item = {**entry.item, "arguments": json.dumps(cut, ensure_ascii=False)}
    held = [needle for needle in needles if needle in visible_text(entry.item)]
    text = visible_text(item)
    if not all(needle in text for needle in held) or ctx.size(text) >= ctx.size(
        visible_text(entry.item)
    ):
        return entry
    return HistoryEntry(entry.seq, item, verbatim=False)


def shrunk_outputs(
    ctx: Context, entries: Sequence[HistoryEntry], *, budget: int, at_least: bool = False
) -> tuple[HistoryEntry, ...] | None:
    """`entries` with their tool outputs truncated head and tail so that all fit `budget`, each
    naming the fact that holds it whole; None when that cannot reach it, unless `at_least`:
    then as far as they go, each output at `MIN_OUTPUT_TOKENS` at least."""
    outputs = [
        k
        for k, entry in enumerate(entries)
        if is_clearable(entry) and isinstance(entry.item.get("output"), str | list)
    ]
    fixed = ctx.total([entry for k, entry in enumerate(entries) if k not in outputs])
    if at_least:
        budget = max(budget, fixed + MIN_OUTPUT_TOKENS * len(outputs))
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


def shrink_kept(ctx: Context, *, head_size: int, target: int) -> CompactionResult:
    """The newest turns alone are over the target: their tool outputs, truncated head and tail
    to reach it, each naming the fact that holds it whole (nothing else is left to compact)."""
    shrunk = shrunk_outputs(ctx, ctx.body, budget=target - head_size)
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
