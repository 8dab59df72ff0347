"""Planning: `plan_compaction`, the entry point that runs one strategy and checks its result.

The guarantees are the package's (see `app.domain.compaction`). How they are kept: every
strategy works on the body (`context.split`: the history without products and re-anchored
invariants) and rebuilds the history as invariants, product, kept body — clear_tool_results in
`clearing`, the lossy strategies in `lossy` (their record in `record`, outputs cut to fit in
`fitting`); whatever a strategy returns is checked for pairing here before it is returned, and
the identifiers of the covered range counted against the new history.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import assert_never

from app.domain.compaction.clearing import clear
from app.domain.compaction.context import Context, split
from app.domain.compaction.extraction import identifiers
from app.domain.compaction.loss_check import find_lost_identifiers
from app.domain.compaction.lossy import lossy
from app.domain.compaction.model import CompactionBroken, CompactionInput, CompactionResult
from app.domain.compaction.product import read_product
from app.domain.history import HistoryEntry
from app.domain.items import CountTokens, visible_text
from app.domain.normalize import find_pairing_violations

__all__ = ["plan_compaction"]


def plan_compaction(inp: CompactionInput, *, count_tokens: CountTokens) -> CompactionResult:
    """Compact `inp.history` under `inp.strategy`; see the package docstring for the guarantees.

    Raises `CompactionBroken` when the new history would break call/output pairing (the input
    history must satisfy it: normalize first).
    """
    size = functools.cache(count_tokens)
    products, body = split(inp)
    ctx = Context(
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
            result = clear(ctx)
        case "truncate":
            result = lossy(ctx, kind=None)
        case "summary" | "handoff" | "notes" as kind:
            result = lossy(ctx, kind=kind)
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
