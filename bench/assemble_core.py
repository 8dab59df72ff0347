"""`assemble` in process: the selection core alone, on the 500 candidates `bench.assemble` posts.

The candidates (≈230 tokens each, built from the public trajectories, counts given) form one
retrieval contribution, as in that benchmark's request. For `recall_cap` 20 (the default: only
the source's best 20 are ranked) and None (all 500 are), the core runs `RUNS` times after one
warm-up. Prints the candidates' tokens, the p50 and best time per run (the core's share of that
benchmark's 500-candidate server time), and the ratio of the p50 to a floor timed in the same
loop: sorting the candidates by the ranking key, the least any ranked selection must do.
Run: `make bench` (or `.venv/bin/python -m bench.assemble_core`).
"""

from __future__ import annotations

import statistics
import time

from app.domain.assemble import AssemblyInput, Candidate, Contribution, assemble, ranking_score
from app.tokens import token_counter
from bench.assemble import build_candidates

CANDIDATES = 500
RUNS = 50
RECALL_CAPS = (20, None)


def main() -> None:
    count_tokens = token_counter("o200k_base")
    candidates = tuple(
        Candidate(source="retrieval", **fields) for fields in build_candidates(CANDIDATES)
    )
    total = sum(c.tokens or 0 for c in candidates)
    header = ("cands", "tokens", "recall_cap", "p50 ms", "best ms", "floor ms", "ratio")
    print(" ".join(f"{h:>10}" for h in header))
    for recall_cap in RECALL_CAPS:
        inp = AssemblyInput(
            contributions=(Contribution("retrieval", candidates),), recall_cap=recall_cap
        )
        assemble(inp, count_tokens=count_tokens)
        timings, floors = [], []
        for _ in range(RUNS):
            started = time.perf_counter()
            sorted(candidates, key=lambda c: (-ranking_score(c), -c.relevance, c.tokens, c.id))
            floors.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            assemble(inp, count_tokens=count_tokens)
            timings.append((time.perf_counter() - started) * 1000)
        cap = "none" if recall_cap is None else str(recall_cap)
        p50, floor = statistics.median(timings), statistics.median(floors)
        row = (CANDIDATES, total, cap, f"{p50:.2f}", f"{min(timings):.2f}", f"{floor:.2f}")
        print(" ".join(f"{v:>10}" for v in row), f"{p50 / floor:>10.1f}")


if __name__ == "__main__":
    main()
