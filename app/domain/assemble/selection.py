"""Selection: which candidates a model sees, in which form, ranked and walked under the budget.

Invariants of `select_candidates`:

- Only the last contribution of each source counts; every candidate of an earlier one is
  dropped (`superseded_contribution`). A retrieval candidate without a locator is dropped
  (`unattributed`).
- No two selected candidates share an identity (`locator`, else `id`): the stronger wins
  (required, then score, then relevance), the first seen on an exact tie.
- A retrieval source offers only its best `recall_cap` candidates; the rest are dropped
  (`recall_cap`) whatever their order.
- Selected tokens never exceed `max_tokens`, and selected candidates never exceed `max_items`,
  except by required candidates, which are always selected. A group's (source class, else
  locator scheme, else layer) selected tokens and items likewise stay within the per-source
  quotas except by required candidates, which bypass every check but are accounted everywhere.
- A candidate restated at the end (placement `edges`) is charged for both of its copies: its
  `restatement` when it has one, else the same again.
- Every candidate not selected has exactly one drop reason.

A non-required candidate is checked in this order: `max_items` (which ends the walk), the group's
item quota, the token bounds (trying the raw form, then `skeleton`, then `reference`), then
near-duplication against the selected retrieval texts.

Ranking is a total order: required first, then `ranking_score` desc, relevance desc, tokens asc,
id asc (then source, locator and input position, so that equal-looking candidates never tie).
Scores are assumed finite (the shell rejects NaN); `near_duplicate_threshold` is in (0, 1].
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.assemble.model import (
    FALLBACK_FORMS,
    RAW_FORM,
    AssemblyInput,
    Candidate,
    DropReason,
    fits,
    ranking_score,
)
from app.domain.items import CountTokens
from app.domain.shingles import ShingleIndex, Shingles, word_shingles


@dataclass(frozen=True)
class Selection:
    """What the walk made of every candidate, each known by its input position (contributions
    in request order)."""

    candidates: Sequence[Candidate]
    scores: Sequence[float]
    raw_tokens: Sequence[int]
    reasons: Mapping[int, DropReason]
    """Why each dropped candidate was dropped; a selected one has no entry."""
    chosen: Mapping[int, tuple[str, int]]
    """The form of each selected candidate, and the tokens of that form."""
    selected: Sequence[int]
    """The selected candidates, in rank order."""
    tokens: int
    """The tokens charged for them, restated copies included."""


def select_candidates(inp: AssemblyInput, *, count: CountTokens) -> Selection:
    """Every candidate of `inp` selected in a form or dropped with its reason; see the module
    doc. `count` is the assembly's one counter, so no text is counted twice."""
    budget = inp.budget
    candidates: list[Candidate] = []
    scores: list[float] = []
    raw_tokens: list[int] = []
    reasons: dict[int, DropReason] = {}
    chosen: dict[int, tuple[str, int]] = {}  # index -> (form, tokens of that form)

    # One pass over the input: superseded contributions, unattributed retrieval, and identity
    # dedupe (the stronger wins, the first seen on an exact tie).
    last_of_source = {contribution.source: n for n, contribution in enumerate(inp.contributions)}
    winner: dict[tuple[str, str], int] = {}
    for n, contribution in enumerate(inp.contributions):
        superseded = last_of_source[contribution.source] != n
        for c in contribution.candidates:
            if (c.content is None) == (c.item is None):
                raise ValueError(f"candidate {c.id!r}: give exactly one of `content` and `item`")
            i = len(candidates)
            candidates.append(c)
            scores.append(ranking_score(c))
            raw_tokens.append(c.tokens if c.tokens is not None else count(c.raw_text))
            if superseded:
                reasons[i] = "superseded_contribution"
                continue
            if c.layer == "retrieval" and not c.locator:
                reasons[i] = "unattributed"
                continue
            identity = ("locator", c.locator) if c.locator is not None else ("id", c.id)
            held = winner.setdefault(identity, i)
            if held == i:
                continue
            h = candidates[held]
            if (c.required, scores[i], c.relevance) > (h.required, scores[held], h.relevance):
                reasons[held] = "duplicate"
                winner[identity] = i
            else:
                reasons[i] = "duplicate"

    # Rank keys, unique thanks to `i` last. A retrieval source offers only its best
    # `recall_cap` (the rest are dropped whatever their order), so only those are ranked.
    considered_keys: list[tuple[Any, ...]] = []
    by_retrieval_source: dict[str, list[tuple[Any, ...]]] = {}
    cap = inp.recall_cap
    for i in winner.values():
        c = candidates[i]
        if not c.required and c.relevance < inp.min_relevance:
            reasons[i] = "below_relevance"
            continue
        key = (
            not c.required,
            -scores[i],
            -c.relevance,
            raw_tokens[i],
            c.id,
            c.source,
            c.locator or "",
            i,
        )
        if c.layer == "retrieval" and cap is not None:
            by_retrieval_source.setdefault(c.source, []).append(key)
        else:
            considered_keys.append(key)
    for keys in by_retrieval_source.values():
        if cap is not None and len(keys) > cap:
            offered = heapq.nsmallest(cap, keys)
            for key in keys:
                if not offered or key > offered[-1]:
                    reasons[key[-1]] = "recall_cap"
            keys = offered
        considered_keys += keys
    considered = [key[-1] for key in sorted(considered_keys)]

    # The walk, in rank order.

    selected: list[int] = []
    total_tokens = 0
    group_items: Counter[str] = Counter()
    group_tokens: Counter[str] = Counter()
    near_duplicates = ShingleIndex(inp.near_duplicate_threshold)
    # Shingles are computed only for retrieval candidates the walk reaches, each once; selected
    # ones wait in `unindexed` until a probe needs them (required ones may never be compared).
    shingles_of: dict[int, Shingles] = {}
    unindexed: list[int] = []

    def shingles(i: int) -> Shingles:
        if i not in shingles_of:
            shingles_of[i] = word_shingles(candidates[i].raw_text)
        return shingles_of[i]

    stopped = False
    for i in considered:
        c = candidates[i]
        # A restated candidate is shown twice, and charged for both copies: the same again
        # (`copies`), or its restatement (`extra`).
        copies, extra = 1, 0
        if c.restate_at_end and inp.placement == "edges":
            if c.restatement is None:
                copies = 2
            else:
                extra = count(c.restatement)
        if c.source_class:
            group = f"class:{c.source_class}"
        elif c.locator:
            group = f"scheme:{c.locator.split(':', 1)[0]}"
        else:
            group = f"layer:{c.layer}"
        form, tokens = RAW_FORM, raw_tokens[i]
        if not c.required:
            if stopped or (budget.max_items is not None and len(selected) >= budget.max_items):
                stopped = True
                reasons[i] = "max_items"
                continue
            limit = budget.max_items_per_source
            if limit is not None and group_items[group] >= limit:
                reasons[i] = "source_max_items"
                continue
            # Lazy: a cheaper form is counted only when every form before it failed.
            sizes = (
                (name, tokens if name == RAW_FORM else count(c.forms[name]))
                for name in (RAW_FORM, *FALLBACK_FORMS)
                if name == RAW_FORM or name in c.forms
            )
            fitting = next(
                (
                    (name, size)
                    for name, size in sizes
                    if fits(copies * size + extra, budget.max_tokens, used=total_tokens)
                    and fits(
                        copies * size + extra,
                        budget.max_tokens_per_source,
                        used=group_tokens[group],
                    )
                ),
                None,
            )
            if fitting is None:
                raw_fits_total = fits(copies * tokens + extra, budget.max_tokens, used=total_tokens)
                reasons[i] = "source_max_tokens" if raw_fits_total else "max_tokens"
                continue
            # Checked last, so that only candidates that would otherwise be selected are ever
            # shingled; the selection is the same as checking it first, since a drop changes no
            # counter, but a candidate failing both is reported by the bound it fails.
            if c.layer == "retrieval":
                for j in unindexed:
                    near_duplicates.add(shingles(j))
                unindexed.clear()
                if near_duplicates.has_near_duplicate(shingles(i)):
                    reasons[i] = "near_duplicate"
                    continue
            form, tokens = fitting
        chosen[i] = (form, tokens)
        selected.append(i)
        total_tokens += copies * tokens + extra
        group_items[group] += 1
        group_tokens[group] += copies * tokens + extra
        if c.layer == "retrieval":
            unindexed.append(i)
    return Selection(
        candidates=candidates,
        scores=scores,
        raw_tokens=raw_tokens,
        reasons=reasons,
        chosen=chosen,
        selected=selected,
        tokens=total_tokens,
    )
