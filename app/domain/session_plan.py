"""The session-mode plan: a session's context assembled, and the notices that name what it
leaves out of the history.

A context that shows the history reduced or not at all names every elided range by its first
fact seq, so the model can read it back with the recall tool: ranges before the first fact the
history shows are named in the stable prefix (the notice changes only where the history's start
does), ranges within it after the history (a new one rewrites only what follows the history).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from app.domain.assemble import (
    TRUNCATED_FORM,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    Contribution,
    Decided,
    HistoryFit,
    Layer,
    SelectedItem,
    arrange,
    decide,
    place,
)
from app.domain.compaction.product import is_compaction_product
from app.domain.elision import (
    NOTICE_ID,
    NOTICE_SOURCE,
    Elided,
    Shown,
    named_seqs,
    notice_text,
    unnamed,
)
from app.domain.history import HistoryEntry
from app.domain.items import CountTokens, visible_text

__all__ = ["SessionHistory", "plan_naming_what_it_leaves_out"]


class SessionHistory(Protocol):
    """What the planner reads of a session's history as loaded (the use cases' `LoadedHistory`):
    where each offered entry sits among the normalized items, the fact each item stands for,
    and what a context showing some of it leaves out (`app.domain.elision.elided`, whose base
    the loaded history keeps between calls)."""

    @property
    def offered_positions(self) -> Sequence[int]: ...
    @property
    def seqs(self) -> Sequence[int | None]: ...
    def elided(
        self, shown: Mapping[int, Shown], *, default_drop: str, record_tokens: int
    ) -> tuple[Elided, ...]: ...


_NOTICE_PASSES = 3
"""Assemblies tried to settle the notice: adding it leaves the history less room, which can
leave out more (one more pass), and what that leaves out extends a range the notice already
names (so a third pass is rarely needed, and none after it)."""


def plan_naming_what_it_leaves_out(
    assembly_input: AssemblyInput, loaded: SessionHistory, *, count: CountTokens, tool: str | None
) -> tuple[AssemblyPlan, tuple[Elided, ...]]:
    """A session-mode plan, what it leaves out of the session's history, and the notices naming
    whatever of that its visible text does not already name: what lies before the first fact
    the history shows in the stable prefix, before the history (it changes only where the
    history's start does); what lies within it, such as a system message normalization left
    out mid-session, after the history (a new one then rewrites only what follows the history,
    never the history itself)."""
    # One counter for every pass: a text is counted once per assembly.
    count = functools.cache(count)
    offered = sum(len(contribution.candidates) for contribution in assembly_input.contributions)
    notice: Contribution | None = None
    settled: Decided | None = None  # the decisions `elided` and `notice` were worked out from
    elided: tuple[Elided, ...] = ()
    for _ in range(_NOTICE_PASSES):
        contributions = assembly_input.contributions + ((notice,) if notice else ())
        inp = replace(assembly_input, contributions=contributions)
        decided = decide(inp, count=count)
        if settled is not None and decided.alike(settled, candidates=offered):
            # The notice took room but changed no decision: the same items are shown and left
            # out, so the same ranges are elided and named by this very notice.
            return place(inp, decided, count=count), elided
        # Arranged, not yet planned: a pass that only settles the notice needs no plan entries.
        arranged = arrange(inp, decided, count=count)
        elided = _elided(loaded, inp.history, decided.history, arranged.items)
        # Reading every shown text for the seqs it names is worth it only when some are left out.
        named = (
            named_seqs(
                item.content or "" if item.item is None else visible_text(item.item)
                for item in arranged.items
                if item.source != NOTICE_SOURCE
            )
            if elided
            else frozenset()
        )
        start = _first_shown_seq(loaded, decided.history)
        before: list[Elided] = []
        within: list[Elided] = []
        for entry in unnamed(elided, named):
            (before if start is None or entry.last_seq < start else within).append(entry)
        placements: tuple[tuple[str, Layer, list[Elided]], ...] = (
            (NOTICE_ID, "prefix", before),
            (f"{NOTICE_ID}#within", "task", within),
        )
        candidates = tuple(
            Candidate(
                id=item_id,
                source=NOTICE_SOURCE,
                layer=layer,
                source_class=NOTICE_SOURCE,
                content=text,
                required=True,
            )
            for item_id, layer, entries in placements
            if (text := notice_text(entries, tool=tool)) is not None
        )
        wanted = Contribution(NOTICE_SOURCE, candidates) if candidates else None
        if wanted == notice:
            break
        notice, settled = wanted, decided
    return place(inp, decided, count=count, arranged=arranged), elided


def _first_shown_seq(loaded: SessionHistory, fit: HistoryFit) -> int | None:
    """The earliest fact seq among the history entries `fit` shows (records a compaction wrote
    have none); None when it shows no logged fact."""
    return min(
        (seq for j in loaded.offered_positions[fit.start :] if (seq := loaded.seqs[j]) is not None),
        default=None,
    )


_WINDOW_DROPS = {"max_tokens": "window", "history_cut": "window"}
"""Both are the window's doing, seen from the model: one reason keeps the notice the same
while a calibration or a cheaper call moves where one ends and the other starts."""


def _elided(
    loaded: SessionHistory,
    history: Sequence[HistoryEntry],
    fit: HistoryFit,
    shown_items: Sequence[SelectedItem],
) -> tuple[Elided, ...]:
    """What a context leaves out of the session's history (see `app.domain.elision`): `history`
    fitted as `fit` says, beside the rest of what it shows (`shown_items`). Only the rows it
    shows are read one by one (and those it cut at a stable point, when the budget's own reason
    for dropping is another)."""
    positions = loaded.offered_positions
    default_drop = _WINDOW_DROPS.get(fit.reason or "max_tokens", fit.reason or "max_tokens")
    shown: dict[int, Shown] = {}
    cut_from = fit.fitting_start if default_drop != "window" else fit.start
    for k in range(cut_from, len(history)):
        dropped = fit.dropped(k)
        shown[positions[k]] = (
            Shown(tokens=fit.tokens(k), dropped=None, cut=fit.form(k, history[k]) == TRUNCATED_FORM)
            if dropped is None
            else Shown(tokens=0, dropped=_WINDOW_DROPS.get(dropped, dropped))
        )
    return loaded.elided(
        shown,
        default_drop=default_drop,
        record_tokens=sum(
            item.tokens
            for item in shown_items
            if item.item is not None and is_compaction_product(item.item)
        ),
    )
