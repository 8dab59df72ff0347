"""Compaction on every public trajectory × every strategy, at a target of 25% of the tokens.

Prints per strategy: tokens before/after, the share of goals kept verbatim (must be 100%), the
share of histories with valid pairing (must be 100%), the share of touched file paths and final
error signatures still findable, fallbacks, and the time per compaction (in-process core).
Run: `make bench` (or `.venv/bin/python -m bench.compaction`).
"""

from __future__ import annotations

import statistics
import time
from typing import get_args

from app.domain.compaction import (
    CompactionInput,
    CompactionParams,
    Strategy,
    find_lost_facts,
    plan_compaction,
)
from app.domain.history import HistoryEntry
from app.domain.items import visible_text
from app.domain.normalize import find_pairing_violations, normalize_history
from app.domain.world_state import render_goal
from app.tokens import token_counter
from bench.common import load_trajectories


def main() -> None:
    count_tokens = token_counter("o200k_base")
    trajectories = load_trajectories()
    print(
        f"{'strategy':<20} {'before':>9} {'after':>9} {'after %':>8} {'goal ok':>8} "
        f"{'paired':>7} {'facts ok':>9} {'fallback':>8} {'ms p50':>7}"
    )
    for strategy in get_args(Strategy):
        before = after = goals = paired = facts_ok = fallbacks = 0
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
        n = len(trajectories)
        print(
            f"{strategy:<20} {before:>9} {after:>9} {after / before:>8.0%} {goals / n:>8.0%} "
            f"{paired / n:>7.0%} {facts_ok / n:>9.0%} {fallbacks:>8} "
            f"{statistics.median(timings):>7.1f}"
        )


if __name__ == "__main__":
    main()
