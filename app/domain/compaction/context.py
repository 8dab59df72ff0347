"""What every strategy starts from, and how it reports a history left over the target.

The history splits into products, body and invariants once, here, for every strategy and for
the summarizer's prompt: products are earlier records (at most one survives a compaction),
invariants are re-anchored in front of them and never compacted, and the body is all a strategy
may clear, drop or record. Every size is the token count of an entry's visible text, counted by
the one (cached) counter in `Context.size`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.compaction.model import CompactionInput, CompactionResult
from app.domain.compaction.product import Product, is_compaction_product
from app.domain.history import HistoryEntry
from app.domain.items import CountTokens, visible_text


@dataclass(frozen=True)
class Context:
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


def over_target(
    ctx: Context,
    *,
    target: int | None,
    parts: Sequence[tuple[str, Sequence[HistoryEntry]]],
    keeps: str,
) -> str | None:
    """Why a compacted history is over `target`, what each part of it takes and what the
    strategy (`keeps`) would not give up to reach it; None within."""
    sizes = [(label, ctx.total(entries)) for label, entries in parts if entries]
    total = sum(size for _, size in sizes)
    if target is None or total <= target:
        return None
    taken = ", ".join(f"{label} {size}" for label, size in sizes)
    return f"{total - target} tokens over the target of {target}: {taken} tokens; {keeps}"
