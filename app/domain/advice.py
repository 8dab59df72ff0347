"""Compaction advice: whether to compact now, why, and with which strategy.

Invariants:

- Pure and deterministic: the same figures and history give the same advice.
- One window: `pressure` is `active_tokens / window`, where `window` is the usable window, the
  very budget session-mode assembly fits (`usable_window`), and `active_tokens` what assembly
  would have to fit: the history without state fragments plus the pinned state (goal, world
  state, restated goal). 0 for a window that is not positive.
- Hysteresis: compaction is advised at the high watermark (`window_pressure`) and compacts down
  to the low one (`Watermarks.target`); between the two only a signal can advise it.
- Every reason is one signal with a human `detail` and the figure behind it (`value`):
  `window_pressure` (pressure ≥ high watermark), `repeated_error` (one error signature in at
  least three of the recent tool outputs), `repeated_question` (one user text, normalized, asked
  at least twice), `phase_change` (the last phase differs from the previous non-null phase),
  `growth` (the next turn, at the recent rate per model call, fills the window),
  `history_cut` (added by assembly when the history no longer fit and its oldest part was cut)
  and `cache_cold` (the provider's cache expired since the lineage's last call, so a compaction
  throws nothing cached away, and it would take at least `COLD_REDUCTION_SHARE` of the span
  between the watermarks off the context).
- Priced when the lineage's cache is known (`cache`): `Advice.price` says what compacting to
  the recommended strategy's product now saves and costs (`app.domain.prompt_cache`).
- `should_compact` is true under window pressure or a cold cache; on any other signal only
  once the window is at least half full, only if the compaction saves at least what it costs
  (unless the window fills on the next turn anyway) and, after a compaction, only once the
  history has grown since by the span between the watermarks: a compaction costs a prompt-cache
  rewrite, so one is never advised right after another while the cache is warm unless the
  history is back at the high watermark (its product itself does not fit).
- `recommended_strategy` is None unless `should_compact`; then `clear_tool_results` (observation
  masking halves cost at no loss of solve rate, peers.md §7) when tool outputs are a large share
  of the history and masking them can bring it to the low watermark, else `summary`.
- `turns_until_full` is floor((window − active) / mean tokens of the recent turns), None when
  there are no turn figures or the turns do not grow the context.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from app.domain.compaction.clearing import is_cleared_output
from app.domain.compaction.extraction import error_signatures
from app.domain.compaction.model import Strategy
from app.domain.compaction.product import is_compaction_product
from app.domain.items import (
    OUTPUT_TYPES,
    Item,
    is_model_output,
    item_type,
    visible_text,
)
from app.domain.prompt_cache import CacheStanding, CompactionPrice, price_compaction
from app.domain.world_state import is_state_fragment

__all__ = [
    "Advice",
    "AdviceSignal",
    "HistoryFigures",
    "Signal",
    "Watermarks",
    "advise",
    "budget_advice",
    "history_figures",
    "is_turn_start",
    "is_user_question",
    "keeps_needing_what_was_hidden",
    "question_key",
    "with_history_cut",
]

Signal = Literal[
    "window_pressure",
    "repeated_error",
    "repeated_question",
    "phase_change",
    "growth",
    "history_cut",
    "cache_cold",
]

RECENT_OUTPUTS = 10
RECENT_TURNS = 5
REPEATED_ERROR_COUNT = 3
REPEATED_QUESTION_COUNT = 2
GROWTH_HORIZON_TURNS = 1
BEHAVIOUR_PRESSURE = 0.5
SMALL_OUTPUT_SHARE = 0.3
COLD_REDUCTION_SHARE = 0.1
"""A cold cache advises a compaction that takes at least this share of the span between the
watermarks off the context: less saves little, and a compaction always hides some detail."""
MASKED_OUTPUT_TOKENS = 40
"""About what a cleared output's placeholder costs: masking an output frees its size less this."""
KEPT_OUTPUTS = 3
"""The newest outputs masking keeps (`CompactionParams.keep_recent`'s default)."""


_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_WORD = re.compile(r"\w+")


_MEMO_MAX_CHARS = 16_384


def question_key(text: str) -> str:
    """A user text's words, case-folded, one space apart: two askings of one question match.

    Memoised for texts up to `_MEMO_MAX_CHARS` (so the memo stays a few megabytes): every call
    re-reads the session's same user texts, and this word scan cost more than the rest of the
    advice.
    """
    return _memo_question_key(text) if len(text) <= _MEMO_MAX_CHARS else _words(text)


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


_memo_question_key = functools.lru_cache(maxsize=1024)(_words)


@dataclass(frozen=True)
class Watermarks:
    """Shares of the usable window: compaction is advised at `high` and compacts to `low`.

    0 < low < high ≤ 1. Defaults are the replay benchmark's choice (README, "Session
    economics"): compacting to a quarter of the window buys a long run of prompt-cache hits per
    compaction while keeping the newest turns verbatim.
    """

    high: float = 0.9
    low: float = 0.25

    def __post_init__(self) -> None:
        if not 0 < self.low < self.high <= 1:
            raise ValueError(
                f"watermarks need 0 < low < high ≤ 1 (got low {self.low}, high {self.high})"
            )

    def target(self, window: int) -> int:
        """Tokens a compaction should bring the context (history and pinned state) down to."""
        return math.floor(self.low * window)

    def span(self, window: int) -> int:
        """Tokens between the watermarks: the growth one compaction buys."""
        return math.floor((self.high - self.low) * window)

    def relaxed(self) -> Watermarks:
        """The low watermark halfway up to the high one: where a session whose model keeps
        needing what compaction hid compacts to (`keeps_needing_what_was_hidden`)."""
        return replace(self, low=(self.low + self.high) / 2)


GRADED_CALLS = 5
"""The recent graded model calls a session's grounding is judged on."""
MISSED_SHARE = 0.1
"""A session whose recent next actions did not see this share of what they used (or more)
keeps needing what its contexts hid."""


def keeps_needing_what_was_hidden(groundings: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the `GRADED_CALLS` most recent graded calls of a session (their stored
    `grounding`, newest first) missed at least `MISSED_SHARE` of the identifiers they needed:
    then its compactions keep more (`Watermarks.relaxed`). Fewer graded calls say nothing."""
    recent = [grounding for grounding in groundings if grounding.get("needed")][:GRADED_CALLS]
    if len(recent) < GRADED_CALLS:
        return False
    needed = sum(int(grounding["needed"]) for grounding in recent)
    missed = sum(int(grounding["needed"]) - int(grounding["visible"]) for grounding in recent)
    return missed >= MISSED_SHARE * needed


@dataclass(frozen=True)
class AdviceSignal:
    signal: Signal
    detail: str
    value: float

    def as_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "detail": self.detail, "value": self.value}


@dataclass(frozen=True)
class Advice:
    """The advice, and the `active_tokens` its pressure weighs (not in `as_dict`: the answers
    that carry advice report their own token figures)."""

    should_compact: bool
    pressure: float
    reasons: tuple[AdviceSignal, ...]
    turns_until_full: int | None
    recommended_strategy: Strategy | None
    active_tokens: int
    price: CompactionPrice | None = None
    """What compacting now would save and cost given the prompt cache (None: not priced)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "should_compact": self.should_compact,
            "pressure": self.pressure,
            "reasons": [reason.as_dict() for reason in self.reasons],
            "turns_until_full": self.turns_until_full,
            "recommended_strategy": self.recommended_strategy,
            "cache": None if self.price is None else self.price.as_dict(),
        }


@dataclass(frozen=True)
class HistoryFigures:
    """What advice reads of a session's normalized history (`history_figures`, or kept as the
    session view advances: `app.domain.advice_figures`).

    Tokens are in the session's encoding; state fragments count toward neither the tokens nor
    the turns (assembly renders the current state in their place). A turn is what one model
    call added: it starts at a user message or at the first model output after anything else
    (an agent's run may hold one user message and hundreds of calls).
    """

    history_tokens: int
    """The tokens of the history but its state fragments."""
    turn_tokens: tuple[int, ...]
    """The tokens each of the newest `RECENT_TURNS` turns added, oldest first."""
    recent_outputs: tuple[str, ...]
    """The visible text of the newest `RECENT_OUTPUTS` tool outputs, oldest first."""
    questions: tuple[tuple[str, int], ...]
    """Each user question (its key) asked `REPEATED_QUESTION_COUNT` times or more, with how
    often, in the order first asked."""
    has_model_output: bool
    chars: int
    """Characters of visible text, all items told."""
    output_chars: int
    """Characters of visible text of the tool outputs."""
    maskable_tokens: int
    """What clearing every tool output but the newest `KEPT_OUTPUTS` would free, less the
    placeholders."""


def history_figures(history: Sequence[Item], sizes: Sequence[int]) -> HistoryFigures:
    """The figures of a whole history, read item by item; `sizes` are the items' tokens."""
    turns: list[int] = []
    tokens = 0
    maskable: list[int] = []
    after_output = False
    for item, size in zip(history, sizes, strict=True):
        if is_state_fragment(item):
            continue
        tokens += size
        is_output = is_model_output(item)
        if is_turn_start(item, is_output, after_output=after_output) or not turns:
            turns.append(0)
        after_output = is_output
        turns[-1] += size
        if item_type(item) in OUTPUT_TYPES and not is_cleared_output(item):
            maskable.append(max(0, size - MASKED_OUTPUT_TOKENS))
    outputs = [item for item in history if item_type(item) in OUTPUT_TYPES]
    asked = Counter(question_key(visible_text(item)) for item in history if is_user_question(item))
    return HistoryFigures(
        history_tokens=tokens,
        turn_tokens=tuple(turns[-RECENT_TURNS:]),
        recent_outputs=tuple(visible_text(item) for item in outputs[-RECENT_OUTPUTS:]),
        questions=tuple(
            (question, count)
            for question, count in asked.items()
            if question and count >= REPEATED_QUESTION_COUNT
        ),
        has_model_output=any(is_model_output(item) for item in history),
        chars=sum(len(visible_text(item)) for item in history),
        output_chars=sum(len(visible_text(item)) for item in outputs),
        maskable_tokens=sum(maskable[:-KEPT_OUTPUTS]),
    )


def is_turn_start(item: Item, model_output: bool, *, after_output: bool) -> bool:
    """Whether `item` (not a state fragment) starts a turn after an item that was model output
    (`after_output`) or not: a user message, or model output after anything else."""
    return (item_type(item) == "message" and item.get("role") == "user") or (
        model_output and not after_output
    )


def is_user_question(item: Item) -> bool:
    """A user message the user wrote (not a compaction's product in a user message)."""
    return (
        item_type(item) == "message"
        and item.get("role") == "user"
        and not is_compaction_product(item)
    )


def advise(
    figures: HistoryFigures,
    *,
    pinned_tokens: int,
    window: int,
    phases: tuple[str | None, str | None] = (None, None),
    watermarks: Watermarks = Watermarks(),
    grown_since_compaction: int | None = None,
    cache: CacheStanding | None = None,
) -> Advice:
    """Advice for a session whose history has `figures` (see the module docstring).

    `window` is the usable window and `pinned_tokens` what assembly adds beside the history
    (the goal and world state): their sum with the history's tokens is what assembly must fit.
    `phases` are the phase of the newest item and the newest other phase set before it,
    `grown_since_compaction` the tokens appended since the last compaction (None: never
    compacted), `cache` the lineage's prompt cache (None: not priced, as for a stateless call).
    """
    active_tokens = pinned_tokens + figures.history_tokens
    pressure = active_tokens / window if window > 0 else 0.0
    reasons: list[AdviceSignal] = []
    if pressure >= watermarks.high:
        reasons.append(
            AdviceSignal(
                "window_pressure",
                f"the active history fills {pressure:.0%} of the window"
                f" (threshold {watermarks.high:.0%})",
                pressure,
            )
        )

    # Digits and addresses differ between runs of one error; they do not make it another error.
    seen = Counter(
        signature
        for text in figures.recent_outputs
        for signature in dict.fromkeys(_VOLATILE.sub("N", s) for s in error_signatures(text))
    )
    reasons.extend(
        AdviceSignal(
            "repeated_error",
            f"the error {signature!r} came back in {count} of the last {RECENT_OUTPUTS} outputs",
            float(count),
        )
        for signature, count in seen.items()
        if count >= REPEATED_ERROR_COUNT
    )
    reasons.extend(
        AdviceSignal(
            "repeated_question",
            f"the user asked the same thing {count} times: {question[:80]!r}",
            float(count),
        )
        for question, count in figures.questions
    )

    last, earlier = phases
    if last is not None and earlier is not None and earlier != last:
        reasons.append(
            AdviceSignal("phase_change", f"the phase changed from {earlier!r} to {last!r}", 1.0)
        )

    recent = figures.turn_tokens
    growth = sum(recent) / len(recent) if recent else 0.0
    turns_until_full = max(0, math.floor((window - active_tokens) / growth)) if growth > 0 else None
    if turns_until_full is not None and turns_until_full <= GROWTH_HORIZON_TURNS:
        reasons.append(
            AdviceSignal(
                "growth",
                f"at {growth:.0f} tokens per turn the window is full in {turns_until_full} turns",
                growth,
            )
        )

    # A share of characters is a fair proxy for a share of tokens, and needs no counter.
    share = figures.output_chars / figures.chars if figures.chars else 0.0
    masked = active_tokens - figures.maskable_tokens
    strategy: Strategy = (
        "clear_tool_results"
        if share >= SMALL_OUTPUT_SHARE and masked <= watermarks.target(window)
        else "summary"
    )
    price, cold = None, False
    if cache is not None:
        price = price_compaction(
            cache,
            context=active_tokens,
            product=masked if strategy == "clear_tool_results" else watermarks.target(window),
            ceiling=math.floor(watermarks.high * window),
            growth=growth,
        )
        cold = (
            price.cache == "cold"
            and cache.discounted
            and price.reduction_tokens >= COLD_REDUCTION_SHARE * watermarks.span(window)
        )
        if cold:
            reasons.append(
                AdviceSignal(
                    "cache_cold",
                    f"the provider's prompt cache expired (the last call was"
                    f" {price.idle_seconds:.0f} s ago, TTL {price.ttl_seconds} s): compacting"
                    " now throws nothing cached away",
                    float(price.idle_seconds or 0.0),
                )
            )
    rested = grown_since_compaction is None or grown_since_compaction >= watermarks.span(window)
    # A signal alone does not advise a compaction that costs more than it saves, unless the
    # window fills on the next turn anyway.
    worth = price is None or price.worth_it or any(r.signal == "growth" for r in reasons)
    # Every strategy keeps the newest turn: before the model's first output there is nothing
    # older to compact.
    should_compact = figures.has_model_output and (
        pressure >= watermarks.high
        or cold
        or (bool(reasons) and pressure >= BEHAVIOUR_PRESSURE and rested and worth)
    )
    return Advice(
        should_compact=should_compact,
        pressure=pressure,
        reasons=tuple(reasons),
        turns_until_full=turns_until_full,
        recommended_strategy=strategy if should_compact else None,
        active_tokens=active_tokens,
        price=price,
    )


def with_history_cut(advice: Advice, *, cut_items: int, cut_tokens: int) -> Advice:
    """`advice` for a call whose assembly cut the `cut_items` oldest history items (`cut_tokens`)
    because the history no longer fit: a compaction is advised, so that the cut stops."""
    if cut_items == 0:
        return advice
    signal = AdviceSignal(
        "history_cut",
        f"the history no longer fits: its {cut_items} oldest items ({cut_tokens} tokens)"
        " were cut at a stable point",
        float(cut_tokens),
    )
    return replace(
        advice,
        should_compact=True,
        reasons=(*advice.reasons, signal),
        recommended_strategy=advice.recommended_strategy or "summary",
    )


def budget_advice(*, total_tokens: int, max_tokens: int | None) -> Advice:
    """The advice of a stateless assembly: how full its budget is, never a compaction (there is
    no session to compact)."""
    pressure = total_tokens / (max_tokens or max(total_tokens, 1))
    return Advice(
        should_compact=False,
        pressure=round(pressure, 4),
        reasons=(),
        turns_until_full=None,
        recommended_strategy=None,
        active_tokens=total_tokens,
    )
