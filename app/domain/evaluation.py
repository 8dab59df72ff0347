"""What a replayed session cost and what its model saw, call by call: the figures an evaluation
gives for each variant of a session's settings (`app.usecases.evaluate`).

Per call, from the context the runtime would have sent (its `messages` and each item's tokens):
- reused: the tokens of the leading messages byte-identical (canonical JSON) to the previous
  call's, what a provider's prompt cache can serve; fresh = input - reused;
- cost, in the provider's terms (`app.domain.cache_simulation`, on the replay's clock): uncached
  input at 1, cached at the read price, the write premium on what is written;
- the goal kept (its text shown), pairing kept (`find_pairing_violations`), over budget (input
  above the usable window), the peak input;
- next-action grounding (`app.domain.grounding`): of the identifiers the call's own output went
  on to use that the history before it held, those the context shows (visible), those only an
  `elided` entry's facts hold (recallable, by the entry's form: what took them out of view),
  and those it holds nowhere (missed).

Pure and deterministic: the same calls give the same figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.domain.cache_simulation import SimulatedProvider, shared_messages
from app.domain.grounding import Grounding
from app.domain.items import Item, visible_text
from app.domain.normalize import find_pairing_violations
from app.domain.prompt_cache import CacheTerms

__all__ = ["VariantTally"]


@dataclass
class VariantTally:
    """One variant's calls, as they are replayed."""

    window: int
    """The usable window, in the session's tokens: a call above it is over budget."""
    terms: CacheTerms
    calls: int = 0
    input_tokens: int = 0
    reused_tokens: int = 0
    cached_tokens: int = 0
    written_tokens: int = 0
    cost: float = 0.0
    compactions: int = 0
    peak_tokens: int = 0
    goal_calls: int = 0
    """Calls with a goal to keep."""
    goal_kept: int = 0
    pairing_kept: int = 0
    over_budget_calls: int = 0
    needing: int = 0
    needed: int = 0
    visible: int = 0
    recallable: int = 0
    all_visible: int = 0
    recallable_by_form: Counter[str] = field(default_factory=Counter)
    _previous: list[bytes] = field(default_factory=list)
    _provider: SimulatedProvider | None = None

    def call(
        self,
        messages: Sequence[Item],
        sizes: Sequence[int],
        *,
        at: float,
        goal: str | None,
        grounding: Grounding,
        elided_forms: Sequence[str],
    ) -> None:
        """Adds one call sent at `at` seconds: `sizes` are the tokens of each of `messages`,
        `elided_forms` the form of each `elided` entry `grounding` indexes."""
        if self._provider is None:
            self._provider = SimulatedProvider(self.terms)
        encoded = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        shared = shared_messages(self._previous, encoded)
        self._previous = encoded
        total = sum(sizes)
        served = self._provider.call(messages, sizes, at=at)
        self.calls += 1
        self.input_tokens += total
        self.reused_tokens += sum(sizes[:shared])
        self.cached_tokens += served.cached
        self.written_tokens += served.written
        self.cost += served.cost(self.terms)
        self.peak_tokens = max(self.peak_tokens, total)
        if goal:
            self.goal_calls += 1
            self.goal_kept += goal in "\n".join(visible_text(m) for m in messages)
        self.pairing_kept += not find_pairing_violations(list(messages))
        self.over_budget_calls += total > self.window
        self.needing += bool(grounding.needed)
        self.needed += len(grounding.needed)
        self.visible += len(grounding.visible)
        self.recallable += len(grounding.recallable)
        self.all_visible += bool(grounding.needed) and grounding.is_all_visible
        self.recallable_by_form.update(elided_forms[i] for i in grounding.recallable.values())

    def figures(self) -> dict[str, Any]:
        """The variant's figures, as the evaluation answers them (shares rounded to 4 places,
        so that the same calls give the same bytes)."""
        calls = max(self.calls, 1)
        missed = self.needed - self.visible - self.recallable
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "reused_tokens": self.reused_tokens,
            "reuse": _share(self.reused_tokens, self.input_tokens),
            "fresh_tokens": self.input_tokens - self.reused_tokens,
            "cached_tokens": self.cached_tokens,
            "written_tokens": self.written_tokens,
            "cost": round(self.cost, 1),
            "compactions": self.compactions,
            "compactions_per_100": round(100 * self.compactions / calls, 2),
            "peak_tokens": self.peak_tokens,
            "goal_kept": _share(self.goal_kept, self.goal_calls) if self.goal_calls else None,
            "pairing_kept": _share(self.pairing_kept, self.calls),
            "over_budget_calls": self.over_budget_calls,
            "grounding": {
                "calls_needing": self.needing,
                "needed": self.needed,
                "visible": self.visible,
                "recallable": self.recallable,
                "missed": missed,
                "visible_share": _share(self.visible, self.needed),
                "all_visible_calls": _share(self.all_visible, self.needing),
                "misses_by_form": dict(sorted(self.recallable_by_form.items())),
            },
        }


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 1.0
