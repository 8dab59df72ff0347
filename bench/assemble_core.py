"""`assemble` in process: the selection core alone, on the 500 candidates `bench.assemble` posts.

The candidates (≈230 tokens each, built from the public trajectories, counts given) form one
retrieval contribution, as in that benchmark's request. For `recall_cap` 20 (the default: only
the source's best 20 are ranked) and None (all 500 are), the core runs `RUNS` times after one
warm-up. Prints the candidates' tokens and the p50 and best time per run: the core's share of
that benchmark's 500-candidate server time.
Run: `make bench` (or `.venv/bin/python -m bench.assemble_core`).
"""

from __future__ import annotations

import statistics
import time

from app.domain.assemble import AssemblyInput, Candidate, Contribution, assemble
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
    print(f"{'cands':>6} {'tokens':>8} {'recall_cap':>10} {'p50 ms':>8} {'best ms':>8}")
    for recall_cap in RECALL_CAPS:
        inp = AssemblyInput(
            contributions=(Contribution("retrieval", candidates),), recall_cap=recall_cap
        )
        assemble(inp, count_tokens=count_tokens)
        timings = []
        for _ in range(RUNS):
            started = time.perf_counter()
            assemble(inp, count_tokens=count_tokens)
            timings.append((time.perf_counter() - started) * 1000)
        cap = "none" if recall_cap is None else str(recall_cap)
        figures = f"{statistics.median(timings):>8.2f} {min(timings):>8.2f}"
        print(f"{CANDIDATES:>6} {total:>8} {cap:>10} {figures}")


if __name__ == "__main__":
    main()
