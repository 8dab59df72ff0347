"""Placement: the order the model sees the selected candidates and the history in, and the plan
that reports what became of every one of them; `assemble` runs selection, the history's fit and
placement, in that order (`decide`, then `arrange` and `place`).

Invariants (see the package doc for the whole contract of `assemble`'s result):

- Under `edges` the order is: the `prefix` layer, sorted by (source, id) only with candidates
  of `history_lead_source` last, so its bytes do not change when other layers change; then the
  history; then memory and retrieval, the strongest at the block's edges and the weakest in its
  middle; then task (required last), recent (input order) and the restated copies. A change to
  anything after the prefix never moves the history's bytes.
- Under `input_order` candidates keep their input order and the history follows them.
- `plan` lists every candidate, then every history entry, each exactly once in input order
  (the dropped ones as runs of one reason each); a position is that of its first occurrence
  among `items`.
- `total_tokens` is the sum of the tokens of `items`, restated copies included.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.assemble.history_fit import HistoryFit, fit_history
from app.domain.assemble.model import (
    BUDGET_REASONS,
    HISTORY_SOURCE,
    LAYERS,
    RAW_FORM,
    RESTATED_SUFFIX,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    DropReason,
    Layer,
    PlanEntry,
    SelectedItem,
    fits,
    plan_hash_of,
)
from app.domain.assemble.selection import Selection, select_candidates
from app.domain.history import HistoryEntry
from app.domain.items import CountTokens


def assemble(inp: AssemblyInput, *, count_tokens: CountTokens) -> AssemblyPlan:
    """Select, degrade and place candidates and history under `inp.budget`; see the package doc."""
    # One cache for the three steps: a text is counted once per assembly, whichever step meets it.
    count = functools.cache(count_tokens)
    return place(inp, decide(inp, count=count), count=count)


@dataclass(frozen=True)
class Decided:
    """What an assembly decides before it places anything: what became of each candidate, and
    the history's share. `place` makes the plan of it."""

    selection: Selection
    history: HistoryFit

    def alike(self, other: Decided, *, candidates: int) -> bool:
        """Whether `other` decided the same for the first `candidates` candidates and for the
        whole history: the same items in the same forms and tokens, the same drops for the
        same reasons (whatever else either selected, placed after them or not)."""
        mine, theirs = self.selection, other.selection
        fit, other_fit = self.history, other.history
        return (
            (fit.start, fit.fitting_start, fit.reason, fit.dropped_tokens, fit.cut_tokens)
            == (
                other_fit.start,
                other_fit.fitting_start,
                other_fit.reason,
                other_fit.dropped_tokens,
                other_fit.cut_tokens,
            )
            and fit.shown_tokens == other_fit.shown_tokens
            and fit.shown_items == other_fit.shown_items
            and _first(mine.chosen, candidates) == _first(theirs.chosen, candidates)
            and _first(mine.reasons, candidates) == _first(theirs.reasons, candidates)
        )


def _first(decisions: Mapping[int, Any], count: int) -> dict[int, Any]:
    return {i: decision for i, decision in decisions.items() if i < count}


def decide(inp: AssemblyInput, *, count: CountTokens) -> Decided:
    """The selection, then the history's fit to what it left; `count` is the assembly's one
    counter, so no text is counted twice."""
    selection = select_candidates(inp, count=count)
    history = fit_history(
        inp, total_tokens=selection.tokens, counted_items=len(selection.selected), count=count
    )
    return Decided(selection, history)


@dataclass(frozen=True)
class Arranged:
    """Everything `decide` selected, in the order the model sees it."""

    items: tuple[SelectedItem, ...]
    position_of: Mapping[int, int]
    """Each selected candidate's position (of its first copy), by its input index."""
    history_position: int
    """The position of the first history entry shown."""


def arrange(inp: AssemblyInput, decided: Decided, *, count: CountTokens) -> Arranged:
    """What `decide` selected for `inp`, in order: candidates, history and restated copies."""
    selection, history = decided.selection, decided.history
    candidates, chosen, selected = selection.candidates, selection.chosen, selection.selected
    restated: list[int] = []
    if inp.placement == "edges":
        rank_of = {i: n for n, i in enumerate(selected)}
        by_layer: dict[Layer, list[int]] = {layer: [] for layer in LAYERS}
        for i in selected:
            by_layer[candidates[i].layer].append(i)
        middle = [i for i in selected if candidates[i].layer in ("memory", "retrieval")]
        order = [
            # Sorted by (source, id) alone so that the prefix bytes survive any other change;
            # the history's lead closes it.
            *sorted(
                by_layer["prefix"],
                key=lambda i: (
                    candidates[i].source == inp.history_lead_source,
                    candidates[i].source,
                    candidates[i].id,
                    rank_of[i],
                ),
            ),
            # The strongest at the block's edges, the weakest in its middle.
            *middle[0::2],
            *reversed(middle[1::2]),
            *(i for i in by_layer["task"] if not candidates[i].required),
            *(i for i in by_layer["task"] if candidates[i].required),
            *sorted(by_layer["recent"]),  # input order: recent candidates are chronological
        ]
        # The history follows the stable prefix directly, and whatever may change from call
        # to call (memory, retrieval, task state) follows the history: an update then never
        # moves the bytes of the history, which are most of a session's reusable prefix.
        leading = len(by_layer["prefix"])
        restated = [i for i in order if candidates[i].restate_at_end]
    else:
        order = sorted(selected)
        leading = len(order)  # input order: contributions, then the history

    items: list[SelectedItem] = []
    position_of: dict[int, int] = {}

    def put(c: Candidate, *, item_id: str, form: str, tokens: int, text: str | None = None) -> None:
        """Place `c` in `form`, or as `text` (a restatement) when given."""
        raw = form == RAW_FORM and text is None
        items.append(
            SelectedItem(
                id=item_id,
                source=c.source,
                layer=c.layer,
                source_class=c.accounting_class,
                form=form,
                position=len(items),
                tokens=tokens,
                content=text if text is not None else c.content if raw else c.forms[form],
                item=c.item if raw else None,
            )
        )

    def put_candidates(chosen_order: Sequence[int]) -> None:
        for i in chosen_order:
            position_of[i] = len(items)
            put(candidates[i], item_id=candidates[i].id, form=chosen[i][0], tokens=chosen[i][1])

    put_candidates(order[:leading])
    history_position = len(items)
    for k in range(history.start, len(inp.history)):
        entry = inp.history[k]
        items.append(
            SelectedItem(
                id=entry.id,
                source=HISTORY_SOURCE,
                layer="recent",
                source_class=HISTORY_SOURCE,
                form=history.form(k, entry),
                position=len(items),
                tokens=history.tokens(k),
                content=None,
                item=history.item(k),
            )
        )
    put_candidates(order[leading:])
    for i in restated:
        c = candidates[i]
        form, tokens = chosen[i]
        if c.restatement is not None:
            form, tokens = RAW_FORM, count(c.restatement)
        put(c, item_id=c.id + RESTATED_SUFFIX, form=form, tokens=tokens, text=c.restatement)

    return Arranged(tuple(items), position_of, history_position)


def place(
    inp: AssemblyInput,
    decided: Decided,
    *,
    count: CountTokens,
    arranged: Arranged | None = None,
) -> AssemblyPlan:
    """The plan of what `decide` decided for `inp`: everything selected, in order (`arranged`,
    when the caller arranged it already), and an entry for every candidate and history entry."""
    budget = inp.budget
    selection, history = decided.selection, decided.history
    candidates, scores, raw_tokens = selection.candidates, selection.scores, selection.raw_tokens
    reasons, chosen = selection.reasons, selection.chosen
    total_tokens, counted_items = history.total_tokens, history.counted_items
    if arranged is None:
        arranged = arrange(inp, decided, count=count)
    items, position_of, history_position = (
        arranged.items,
        arranged.position_of,
        arranged.history_position,
    )

    plan: list[PlanEntry] = []
    for i, c in enumerate(candidates):
        reason = reasons.get(i)
        form, tokens = chosen[i] if reason is None else (RAW_FORM, raw_tokens[i])
        plan.append(
            {
                "id": c.id,
                "source": c.source,
                "layer": c.layer,
                "source_class": c.source_class or c.layer,  # Candidate.accounting_class
                "decision": "selected" if reason is None else "dropped",
                "reason": reason,
                "form": form,
                "tokens": tokens,
                "score": scores[i],
                "position": position_of.get(i),
            }
        )
    history_start = history.start
    plan += _dropped_history(inp.history, history)
    plan += [
        {
            "id": entry.id,
            "source": HISTORY_SOURCE,
            "layer": "recent",
            "source_class": HISTORY_SOURCE,
            "decision": "selected",
            "reason": None,
            "form": history.form(k, entry),
            "tokens": history.tokens(k),
            "score": None,
            "position": history_position + k - history_start,
        }
        for k in range(history_start, len(inp.history))
        for entry in (inp.history[k],)
    ]

    by_source_class: Counter[str] = Counter()
    for selected_item in items:
        by_source_class[selected_item.source_class] += selected_item.tokens
    return AssemblyPlan(
        items=items,
        plan=tuple(plan),
        total_tokens=total_tokens,
        truncated=history_start > 0 or any(reason in BUDGET_REASONS for reason in reasons.values()),
        over_budget=not fits(0, budget.max_tokens, used=total_tokens)
        or not fits(0, budget.max_items, used=counted_items),
        by_source_class=dict(sorted(by_source_class.items())),
        plan_hash=plan_hash_of(items),
    )


def _dropped_history(history: Sequence[HistoryEntry], fit: HistoryFit) -> list[PlanEntry]:
    """The plan entries of the history `fit` leaves out: one per run of entries dropped for
    one reason (those the budget could not keep, then those cut at a stable point), named by
    the run's first and last entry, with their tokens summed. A run of one entry is named as
    that entry."""
    runs: tuple[tuple[int, int, DropReason | None, int], ...] = (
        (0, fit.fitting_start, fit.reason, fit.dropped_tokens),
        (fit.fitting_start, fit.start, "history_cut", fit.cut_tokens),
    )
    return [
        {
            "id": history[first].id
            if last == first + 1
            else f"{HISTORY_SOURCE}:{first}-{last - 1}",
            "source": HISTORY_SOURCE,
            "layer": "recent",
            "source_class": HISTORY_SOURCE,
            "decision": "dropped",
            "reason": reason,
            "form": RAW_FORM,
            "tokens": tokens,
            "score": None,
            "position": None,
        }
        for first, last, reason, tokens in runs
        if last > first
    ]
