"""Compaction: the pure core of `POST /compact`.

`plan_compaction` shrinks the active history under one declared strategy and reports what it
did. For every strategy and every input:

- The new history starts with `inp.invariants`, verbatim and in order. Summary, handoff and
  notes put exactly one product item right after them (the record of the compacted range);
  clear_tool_results and truncate keep an earlier product there unchanged. The kept items
  follow in chronological order.
- Call/output pairing holds in the new history (`find_pairing_violations` is empty), or
  `CompactionBroken` is raised: a broken history is never returned. Items are kept or dropped
  by whole units, the ranges between `history_cuts` (see `app.domain.history`), so a call never
  loses its output nor a reasoning item the item it led to; a cleared output keeps its call_id.
- The goal is pinned: the new history carries it verbatim, among `inp.invariants` when they
  hold it (a session: the product then names it, `goal_pinned`, rather than paying its tokens
  twice), else in the product under its own heading (`inp.goal`, else the earlier record's).
  A summary text from a model never replaces it: goal claims in that text are removed.
- User requests keep the user's words and are attributed to the user; decisions, state and next
  steps are attributed to the agent. Nothing the agent said is recorded as the user's.
- Re-compaction merges, never nests: the earlier product found in the history (or given as
  `previous_summary` / `previous_notes`) is folded into the new one and dropped, with the
  re-anchored invariants in front of it. A product carries every part the earlier one had (a
  notes record keeps an earlier summary, a summary keeps earlier lessons), and the notes pinned by
  a pre_compact hook. An item equal to one of `inp.invariants` is dropped wherever it is.
- Lossy strategies (truncate, summary, handoff, notes) pass the loss check: the goal, the latest
  user request, every file path touched in the covered range and its latest unresolved error
  signature are substrings of the new history's visible text. When the first draft misses some,
  the cheapest covered units carrying them are re-loaded verbatim (outputs in them that carry
  nothing needed are masked); when that cannot help, the strategy falls back to
  clear_tool_results (`fell_back`). `loss_missing` lists what the first draft missed.
- `target_tokens` defaults to half the history for the lossy strategies; clear_tool_results
  clears the oldest clearable outputs until the history is within it (every clearable output
  but the newest `keep_recent` when no target is given). Nothing to compact, a target no
  smaller than the history, or clearing that frees less than `clear_at_least_tokens` gives
  `is_noop` and the history exactly as it came.
- Inputs are never mutated; a changed item is a new object and its entry has `verbatim=False`.
  Entries the core writes (products, invariants) have `seq=None`.
- Pure and deterministic: same input and counter, same output. No I/O, clock or randomness.

The package, one concern a module: `model` (the vocabulary: strategies, declarations, records,
input and result), `extraction` (what a range of history shows, and the records built from it),
`product` (the product item: written and read back exactly), `loss_check` (the facts a lossy
strategy must keep, and the identifiers a new history still lets the agent find), `strategies`
(planning: `plan_compaction`), `context` (what every strategy starts from: products, body,
invariants), `clearing` (clear_tool_results), `lossy` (truncate, summary, handoff, notes),
`record` (the record those write), `fitting` (outputs cut to fit), `trail` (the name trail) and
`prompt` (the summarizer's prompt).
"""

from app.domain.compaction.extraction import (
    error_signatures,
    identifiers,
    summarize_builtin,
)
from app.domain.compaction.loss_check import find_lost_facts, find_lost_identifiers
from app.domain.compaction.model import (
    DECLARATIONS,
    DEFAULT_KEEP_RECENT,
    HANDOFF_MARKER,
    NOTES_MARKER,
    PRODUCT_STRATEGIES,
    SUMMARY_MARKER,
    CompactionBroken,
    CompactionInput,
    CompactionParams,
    CompactionResult,
    Handoff,
    Identifier,
    IdentifierKind,
    NotAppliedReason,
    Notes,
    Strategy,
    Summarizer,
    Summary,
)
from app.domain.compaction.product import is_compaction_product, notes_of, summary_of
from app.domain.compaction.prompt import render_summarization_prompt
from app.domain.compaction.strategies import plan_compaction

__all__ = [
    "DECLARATIONS",
    "DEFAULT_KEEP_RECENT",
    "HANDOFF_MARKER",
    "NOTES_MARKER",
    "PRODUCT_STRATEGIES",
    "SUMMARY_MARKER",
    "CompactionBroken",
    "CompactionInput",
    "CompactionParams",
    "CompactionResult",
    "Handoff",
    "Identifier",
    "IdentifierKind",
    "NotAppliedReason",
    "Notes",
    "Strategy",
    "Summarizer",
    "Summary",
    "error_signatures",
    "find_lost_facts",
    "find_lost_identifiers",
    "identifiers",
    "is_compaction_product",
    "notes_of",
    "plan_compaction",
    "render_summarization_prompt",
    "summarize_builtin",
    "summary_of",
]
