"""Compaction advice: whether to compact now, why, and with which strategy.

Invariants:

- Pure and deterministic: the same figures and history give the same advice.
- `pressure` is `active_tokens / context_window` (0 for a window that is not positive).
- Every reason is one signal with a human `detail` and the figure behind it (`value`):
  `window_pressure` (pressure ≥ threshold), `repeated_error` (one error signature in at least
  three of the recent tool outputs), `repeated_question` (one user text, normalized, asked at
  least twice), `phase_change` (the last phase differs from the previous non-null phase) and
  `growth` (the window fills within a few turns at the recent rate).
- `should_compact` is true under window pressure or imminent growth, or, once the window is at
  least half full, on a behaviour signal: a loop or a phase boundary is a good moment to compact,
  but below half the window a compaction costs a prompt-cache rewrite for little gain.
- `recommended_strategy` is None unless `should_compact`; then `clear_tool_results` (observation
  masking halves cost at no loss of solve rate, peers.md §7) unless tool outputs are a small
  share of the history, where masking frees little and `summary` is advised.
- `turns_until_full` is floor((window − active) / mean tokens of the recent turns), None when
  there are no turn figures or the turns do not grow the context.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain.compaction.extraction import error_signatures
from app.domain.compaction.model import Strategy
from app.domain.compaction.product import is_compaction_product
from app.domain.items import OUTPUT_TYPES, Item, item_type, visible_text

__all__ = ["Advice", "AdviceSignal", "Signal", "advise", "advise_session", "budget_advice"]

Signal = Literal["window_pressure", "repeated_error", "repeated_question", "phase_change", "growth"]

RECENT_OUTPUTS = 10
RECENT_TURNS = 5
REPEATED_ERROR_COUNT = 3
REPEATED_QUESTION_COUNT = 2
GROWTH_HORIZON_TURNS = 3
BEHAVIOUR_PRESSURE = 0.5
SMALL_OUTPUT_SHARE = 0.3

_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_WORD = re.compile(r"\w+")


_MEMO_MAX_CHARS = 16_384


def _question_key(text: str) -> str:
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
class AdviceSignal:
    signal: Signal
    detail: str
    value: float

    def as_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "detail": self.detail, "value": self.value}


@dataclass(frozen=True)
class Advice:
    should_compact: bool
    pressure: float
    reasons: tuple[AdviceSignal, ...]
    turns_until_full: int | None
    recommended_strategy: Strategy | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "should_compact": self.should_compact,
            "pressure": self.pressure,
            "reasons": [reason.as_dict() for reason in self.reasons],
            "turns_until_full": self.turns_until_full,
            "recommended_strategy": self.recommended_strategy,
        }


def advise(
    *,
    active_tokens: int,
    context_window: int,
    history: Sequence[Item],
    phases: Sequence[str | None],
    turn_tokens: Sequence[int],
    threshold: float = 0.9,
) -> Advice:
    """Advice for a session whose active history is `history` (see the module docstring).

    `phases` are the phases of the session's items or turns in order, `turn_tokens` the tokens
    each recent turn added to the active history.
    """
    pressure = active_tokens / context_window if context_window > 0 else 0.0
    reasons: list[AdviceSignal] = []
    if pressure >= threshold:
        reasons.append(
            AdviceSignal(
                "window_pressure",
                f"the active history fills {pressure:.0%} of the window"
                f" (threshold {threshold:.0%})",
                pressure,
            )
        )

    outputs = [item for item in history if item_type(item) in OUTPUT_TYPES]
    # Digits and addresses differ between runs of one error; they do not make it another error.
    seen = Counter(
        signature
        for item in outputs[-RECENT_OUTPUTS:]
        for signature in dict.fromkeys(
            _VOLATILE.sub("N", s) for s in error_signatures(visible_text(item))
        )
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

    asked = Counter(
        _question_key(visible_text(item))
        for item in history
        if item_type(item) == "message"
        and item.get("role") == "user"
        and not is_compaction_product(item)
    )
    reasons.extend(
        AdviceSignal(
            "repeated_question",
            f"the user asked the same thing {count} times: {question[:80]!r}",
            float(count),
        )
        for question, count in asked.items()
        if question and count >= REPEATED_QUESTION_COUNT
    )

    if phases and (last := phases[-1]) is not None:
        earlier = next((phase for phase in reversed(phases[:-1]) if phase is not None), None)
        if earlier is not None and earlier != last:
            reasons.append(
                AdviceSignal("phase_change", f"the phase changed from {earlier!r} to {last!r}", 1.0)
            )

    recent = turn_tokens[-RECENT_TURNS:]
    growth = sum(recent) / len(recent) if recent else 0.0
    turns_until_full = (
        max(0, math.floor((context_window - active_tokens) / growth)) if growth > 0 else None
    )
    if turns_until_full is not None and turns_until_full <= GROWTH_HORIZON_TURNS:
        reasons.append(
            AdviceSignal(
                "growth",
                f"at {growth:.0f} tokens per turn the window is full in {turns_until_full} turns",
                growth,
            )
        )

    should_compact = any(reason.signal in ("window_pressure", "growth") for reason in reasons) or (
        bool(reasons) and pressure >= BEHAVIOUR_PRESSURE
    )
    recommended: Strategy | None = None
    if should_compact:
        # A share of characters is a fair proxy for a share of tokens, and needs no counter.
        total = sum(len(visible_text(item)) for item in history)
        share = sum(len(visible_text(item)) for item in outputs) / total if total else 0.0
        recommended = "clear_tool_results" if share >= SMALL_OUTPUT_SHARE else "summary"
    return Advice(
        should_compact=should_compact,
        pressure=pressure,
        reasons=tuple(reasons),
        turns_until_full=turns_until_full,
        recommended_strategy=recommended,
    )


def advise_session(
    history: Sequence[Item],
    sizes: Sequence[int],
    *,
    phases: Sequence[str | None],
    context_window: int,
    threshold: float,
) -> Advice:
    """`advise` for a session's normalized active history, given each item's tokens in the
    session's encoding. A turn runs from one user message to the next: its tokens measure the
    growth rate."""
    turns: list[int] = []
    for item, size in zip(history, sizes, strict=True):
        if (item_type(item) == "message" and item.get("role") == "user") or not turns:
            turns.append(0)
        turns[-1] += size
    return advise(
        active_tokens=sum(sizes),
        context_window=context_window,
        history=history,
        phases=phases,
        turn_tokens=turns,
        threshold=threshold,
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
    )
