"""Compaction on every public trajectory × every strategy, at a target of 25% of the tokens.

Prints per strategy: tokens before/after, the runs whose new history is within the target and,
of the others, how many the answer says why (`over_target`: must be all); the runs within 1.2x
of the larger of the target and the pinned minimum (the invariants and the newest unit with each
output at its least, `MIN_OUTPUT_TOKENS`: what no strategy gives up), and the largest such
ratio; the
share of histories with valid pairing (must be 100%), the share of histories whose loss-check
facts (goal, latest request, touched files, latest unresolved error) are all still findable,
fallbacks, the time per compaction (in-process core), and identifier survival: of the file paths,
shell commands and error signatures of the covered range, how many there are and the share still
findable (visible, kept verbatim, or replaced by a placeholder naming the fact to fetch), in all
and by kind; of the touched file paths, the share visible in the new history and the share
visible or recallable (a fact showing it is kept, or named by seq in the new history's text, as
records and placeholders name what they stand for); a last line totals the identifiers over all
strategies.
Run: `make bench` (or `.venv/bin/python -m bench.compaction`).
"""

from __future__ import annotations

import re
import statistics
import time
from collections import Counter
from typing import get_args

from app.domain.compaction import (
    CompactionInput,
    CompactionParams,
    IdentifierKind,
    Strategy,
    find_lost_facts,
    find_lost_identifiers,
    identifiers,
    plan_compaction,
)
from app.domain.compaction.model import ProductKind
from app.domain.compaction.product import Product, render_product
from app.domain.history import HistoryEntry, history_cuts
from app.domain.items import OUTPUT_TYPES, CountTokens, item_type, visible_text
from app.domain.normalize import find_pairing_violations, normalize_history
from app.domain.truncation import MIN_OUTPUT_TOKENS
from app.domain.world_state import render_goal
from app.tokens import token_counter
from bench.common import load_trajectories

KINDS: tuple[IdentifierKind, ...] = get_args(IdentifierKind)
NAMED_SEQS = re.compile(r"\bfact seqs? (\d+)(?:–(\d+))?")


def named_seqs(text: str) -> set[int]:
    """The seqs `text` names as "fact seq N" or "fact seqs A–B"."""
    return {
        seq
        for first, last in NAMED_SEQS.findall(text)
        for seq in range(int(first), int(last or first) + 1)
    }


def frame_tokens(kind: ProductKind, count_tokens: CountTokens) -> int:
    """A record's tokens with no section: its marker, preamble and meta."""
    empty = Product(kind, None, None, None, None, (), (1, 10), goal_pinned=True)
    return count_tokens(visible_text(render_product(empty)))


def pinned_minimum(inp: CompactionInput, count_tokens: CountTokens) -> int:
    """What no strategy gives up: the invariants, and the newest unit (between the last two
    `history_cuts`), or the newest `keep_recent` items to a cut when more, with each tool output
    at its least; a strategy that writes a record writes at least its frame too (`frame_tokens`)."""
    items = [entry.item for entry in inp.history]
    cuts = history_cuts(items)
    newest_unit = cuts[-2] if len(cuts) > 1 else 0
    recent = max((c for c in cuts if c <= max(0, len(items) - inp.params.keep_recent)), default=0)
    newest = items[min(newest_unit, recent) :]
    least = sum(
        min(count_tokens(visible_text(item)), MIN_OUTPUT_TOKENS)
        if item_type(item) in OUTPUT_TYPES
        else count_tokens(visible_text(item))
        for item in newest
    )
    kinds: tuple[ProductKind, ...] = get_args(ProductKind)
    frame = next((frame_tokens(k, count_tokens) for k in kinds if k == inp.strategy), 0)
    return sum(count_tokens(visible_text(item)) for item in inp.invariants) + least + frame


def survival(found: Counter[IdentifierKind], kept: Counter[IdentifierKind]) -> str:
    """Identifiers, share kept, and share kept by kind."""
    total = sum(found.values())
    by_kind = [
        f"{kept[kind] / found[kind]:>7.1%}" if found[kind] else f"{'-':>7}" for kind in KINDS
    ]
    return f"{total:>7} {sum(kept.values()) / max(1, total):>7.1%} {' '.join(by_kind)}"


def main() -> None:
    count_tokens = token_counter("o200k_base")
    trajectories = load_trajectories()
    print(
        f"{'strategy':<20} {'before':>9} {'after':>9} {'after %':>8} {'goal ok':>8} "
        f"{'paired':>7} {'facts ok':>9} {'fallback':>8} {'ms p50':>7} "
        f"{'idents':>7} {'ids ok':>7} {'paths':>7} {'cmds':>7} {'errors':>7} "
        f"{'within':>7} {'why':>5} {'≤1.2x':>6} {'worst':>6} {'touched':>8} {'+recall':>8}"
    )
    all_found: Counter[IdentifierKind] = Counter()
    all_kept: Counter[IdentifierKind] = Counter()
    for strategy in get_args(Strategy):
        before = after = goals = paired = facts_ok = fallbacks = within = explained = 0
        near, worst = 0, 0.0
        paths = paths_visible = paths_reachable = 0
        found: Counter[IdentifierKind] = Counter()
        kept: Counter[IdentifierKind] = Counter()
        timings = []
        for items in trajectories.values():
            history = normalize_history(items, count_tokens=count_tokens).items
            goal = next(visible_text(i) for i in history if i.get("role") == "user")
            entries = tuple(HistoryEntry(seq=n, item=i) for n, i in enumerate(history, 1))
            tokens = sum(count_tokens(visible_text(i)) for i in history)
            inp = CompactionInput(
                history=entries,
                strategy=strategy,
                params=CompactionParams(target_tokens=max(1, tokens // 4)),
                goal=goal,
                invariants=(render_goal(goal, version=1),),
            )
            started = time.perf_counter()
            result = plan_compaction(inp, count_tokens=count_tokens)
            timings.append((time.perf_counter() - started) * 1000)
            new_items = [e.item for e in result.history]
            text = "\n".join(visible_text(i) for i in new_items)
            before += result.tokens_before
            after += result.tokens_after
            goals += goal in text
            paired += not find_pairing_violations(new_items)
            lost = find_lost_facts(covered=entries, new_history=result.history, goal=goal)
            facts_ok += not lost
            fallbacks += result.fell_back
            target = inp.params.target_tokens or 0
            within += result.tokens_after <= target
            explained += result.tokens_after > target and result.over_target is not None
            ratio = result.tokens_after / max(target, pinned_minimum(inp, count_tokens))
            near += ratio <= 1.2
            worst = max(worst, ratio)
            if result.covered is not None:
                first, last = result.covered
                covered = [e for e in entries if e.seq is not None and first <= e.seq <= last]
                shown = identifiers(covered)
                gone = find_lost_identifiers(covered=covered, new_history=result.history)
                found.update(identifier.kind for identifier in shown)
                kept.update(identifier.kind for identifier in shown if identifier not in gone)
                named = named_seqs(text) | {e.seq for e in result.history if e.verbatim}
                for path in (identifier for identifier in shown if identifier.kind == "path"):
                    paths += 1
                    paths_visible += path.text in text
                    paths_reachable += path.text in text or not named.isdisjoint(path.seqs)
        all_found.update(found)
        all_kept.update(kept)
        n = len(trajectories)
        print(
            f"{strategy:<20} {before:>9} {after:>9} {after / before:>8.0%} {goals / n:>8.0%} "
            f"{paired / n:>7.0%} {facts_ok / n:>9.0%} {fallbacks:>8} "
            f"{statistics.median(timings):>7.1f} {survival(found, kept)} {within:>7} "
            f"{explained:>5} {near:>6} {worst:>6.2f} {paths_visible / max(paths, 1):>8.1%} "
            f"{paths_reachable / max(paths, 1):>8.1%}"
        )
    print(
        f"{'total':<20} {'':>9} {'':>9} {'':>8} {'':>8} {'':>7} {'':>9} {'':>8} {'':>7} "
        f"{survival(all_found, all_kept)}"
    )


if __name__ == "__main__":
    main()
