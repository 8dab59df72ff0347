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
  and those it holds nowhere (missed);
- for a context the service made (`ServiceAnswer`), what it said of it: the reused prefix it
  predicted, the goal's restatement, whether it had to cut the history, the prefix break it
  named; whether the call left the previous call's history before its end; whether it names
  every elided entry's first seq; and, against the simulated provider, the calls an expired
  entry would have served more, the prediction over the calls without expiry, and the class
  the service gave each call served less than it predicted.

Pure and deterministic: the same calls give the same figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.domain.cache_simulation import Served, SimulatedProvider, shared_messages
from app.domain.grounding import Grounding
from app.domain.items import Item, visible_text
from app.domain.normalize import find_pairing_violations
from app.domain.prompt_cache import CacheTerms

__all__ = ["ServiceAnswer", "VariantTally", "combined"]


@dataclass(frozen=True)
class ServiceAnswer:
    """What the service said of a context it made, beside the context itself."""

    predicted_reused: int
    """Its `cache.reused_prefix_tokens`."""
    restated: int
    """The tokens of the goal's restatement at the end."""
    history_cut: bool
    """Whether it had to cut the history (the advice's `history_cut` signal)."""
    named_break: str | None
    """The cause of the prefix break it named (`cache.break`), if any."""
    history_end: int
    """How many leading messages hold the history: one past the last history item."""
    seqs_named: bool
    """Whether the visible text names every elided entry's first seq."""


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
    recorded_summaries: int = 0
    """Compactions whose record used the summary the log recorded (a variant's `client`)."""
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
    recall_checked: int = 0
    recall_confirmed: int = 0
    predicted_reused_tokens: int = 0
    restated_tokens: int = 0
    history_cut_calls: int = 0
    hiding: int = 0
    seqs_named: int = 0
    left_history: int = 0
    """Calls whose messages left the previous call's before the end of its history."""
    named_breaks: Counter[str] = field(default_factory=Counter)
    expired_calls: int = 0
    predicted_unexpired: int = 0
    cached_unexpired: int = 0
    misses: int = 0
    """Calls the simulated provider served less than the service predicted."""
    misses_by_class: Counter[str] = field(default_factory=Counter)
    unclassified_misses: int = 0
    graded_needing: int = 0
    graded_needed: int = 0
    graded_visible: int = 0
    graded_all_visible: int = 0
    _previous: list[bytes] = field(default_factory=list)
    _history_end: int = 0
    _provider: SimulatedProvider | None = None

    def call(
        self,
        messages: Sequence[Item],
        sizes: Sequence[int],
        *,
        at: float,
        goal: str | None,
        grounding: Grounding,
        elided_forms: Sequence[str] = (),
        service: ServiceAnswer | None = None,
    ) -> Served:
        """Adds one call sent at `at` seconds: `sizes` are the tokens of each of `messages`,
        `elided_forms` the form of each `elided` entry `grounding` indexes, `service` what the
        service said of the context when it made it. Returns the call as the simulated
        provider served it (what a runtime reports as usage)."""
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
        if service is None:
            return served
        self.predicted_reused_tokens += service.predicted_reused
        self.restated_tokens += service.restated
        self.history_cut_calls += service.history_cut
        self.hiding += bool(elided_forms)
        self.seqs_named += bool(elided_forms) and service.seqs_named
        self.left_history += shared < self._history_end
        self._history_end = service.history_end
        if service.named_break is not None:
            self.named_breaks[service.named_break] += 1
        # What the service expects the provider to serve: its prediction under the same
        # minimum prefix and blocks (a prefix below the minimum is not a misprediction).
        terms = self.terms
        expected = (
            service.predicted_reused if service.predicted_reused >= terms.minimum_prefix else 0
        )
        expected -= expected % terms.block
        self.expired_calls += served.expired
        if not served.expired:
            self.predicted_unexpired += expected
            self.cached_unexpired += served.cached
        return served

    def classified(self, outcome: str | None) -> None:
        """Adds the service's class (`cache_outcome`) of a call the simulated provider served
        less than it predicted."""
        self.misses += 1
        if outcome is None:
            self.unclassified_misses += 1
        else:
            self.misses_by_class[outcome] += 1

    def recall_checked_for(self, confirmed: bool) -> None:
        """Adds one recallable identifier checked with the recall search of its entry's range."""
        self.recall_checked += 1
        self.recall_confirmed += confirmed

    def graded(self, grade: Mapping[str, Any] | None) -> None:
        """Adds the service's own grade of one call, made when its output was appended (an
        assembly's `grounding`)."""
        if grade and grade["needed"]:
            self.graded_needing += 1
            self.graded_needed += grade["needed"]
            self.graded_visible += grade["visible"]
            self.graded_all_visible += grade["all_visible"]

    def figures(self) -> dict[str, Any]:
        """The variant's figures, as the evaluation answers them (shares rounded to 4 places,
        so that the same calls give the same bytes)."""
        return _with_shares(self._counts())

    def _counts(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "reused_tokens": self.reused_tokens,
            "cached_tokens": self.cached_tokens,
            "written_tokens": self.written_tokens,
            "cost": self.cost,
            "compactions": self.compactions,
            "recorded_summaries": self.recorded_summaries,
            "peak_tokens": self.peak_tokens,
            "goal_calls": self.goal_calls,
            "goal_kept_calls": self.goal_kept,
            "pairing_kept_calls": self.pairing_kept,
            "over_budget_calls": self.over_budget_calls,
            "grounding": {
                "calls_needing": self.needing,
                "needed": self.needed,
                "visible": self.visible,
                "recallable": self.recallable,
                "calls_seeing_all": self.all_visible,
                "misses_by_form": dict(self.recallable_by_form),
                "calls_hiding": self.hiding,
                "calls_naming_every_seq": self.seqs_named,
                "recall_checked": self.recall_checked,
                "recall_confirmed": self.recall_confirmed,
                "graded": {
                    "calls_needing": self.graded_needing,
                    "needed": self.graded_needed,
                    "visible": self.graded_visible,
                    "calls_seeing_all": self.graded_all_visible,
                },
            },
            "predicted_reused_tokens": self.predicted_reused_tokens,
            "restated_tokens": self.restated_tokens,
            "history_cut_calls": self.history_cut_calls,
            "prefix": {
                "left_history_calls": self.left_history,
                "named_breaks": dict(self.named_breaks),
            },
            "provider_cache": {
                "expired_calls": self.expired_calls,
                "predicted_unexpired_tokens": self.predicted_unexpired,
                "cached_unexpired_tokens": self.cached_unexpired,
                "misses": self.misses,
                "misses_by_class": dict(self.misses_by_class),
                "unclassified_misses": self.unclassified_misses,
            },
        }


def combined(figures: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several replays' figures (one variant's over several sessions, say) as one: counts and
    costs summed, the peak the largest, and the shares computed again from the sums."""
    return _with_shares(_summed(figures))


_SHARES = frozenset(
    {"reuse", "fresh_tokens", "compactions_per_100", "goal_kept", "pairing_kept", "missed"}
    | {"visible_share", "all_visible_calls"}
)
"""What `_with_shares` derives from the counts (and `combined` so leaves out of its sum)."""


def _summed(figures: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for each in figures:
        for key, value in each.items():
            if key in _SHARES or key in ("name", "settings"):
                continue
            if isinstance(value, Mapping):
                total[key] = _summed([total.get(key, {}), value])
            elif key == "peak_tokens":
                total[key] = max(total.get(key, 0), value)
            else:
                total[key] = total.get(key, 0) + value
    return total


def _with_shares(counts: Mapping[str, Any]) -> dict[str, Any]:
    """`counts` in the answer's shape, with the shares derived from them."""
    calls, grounding = counts["calls"], counts["grounding"]
    goal_calls = counts["goal_calls"]
    return {
        "calls": calls,
        "input_tokens": counts["input_tokens"],
        "reused_tokens": counts["reused_tokens"],
        "reuse": _share(counts["reused_tokens"], counts["input_tokens"]),
        "fresh_tokens": counts["input_tokens"] - counts["reused_tokens"],
        "cached_tokens": counts["cached_tokens"],
        "written_tokens": counts["written_tokens"],
        "cost": round(counts["cost"], 1),
        "compactions": counts["compactions"],
        "compactions_per_100": round(100 * counts["compactions"] / max(calls, 1), 2),
        "recorded_summaries": counts["recorded_summaries"],
        "peak_tokens": counts["peak_tokens"],
        "goal_calls": goal_calls,
        "goal_kept": _share(counts["goal_kept_calls"], goal_calls) if goal_calls else None,
        "goal_kept_calls": counts["goal_kept_calls"],
        "pairing_kept": _share(counts["pairing_kept_calls"], calls),
        "pairing_kept_calls": counts["pairing_kept_calls"],
        "over_budget_calls": counts["over_budget_calls"],
        "grounding": {
            **grounding,
            "missed": grounding["needed"] - grounding["visible"] - grounding["recallable"],
            "visible_share": _share(grounding["visible"], grounding["needed"]),
            "all_visible_calls": _share(grounding["calls_seeing_all"], grounding["calls_needing"]),
            "misses_by_form": dict(sorted(grounding["misses_by_form"].items())),
        },
        "predicted_reused_tokens": counts["predicted_reused_tokens"],
        "restated_tokens": counts["restated_tokens"],
        "history_cut_calls": counts["history_cut_calls"],
        "prefix": {
            **counts["prefix"],
            "named_breaks": dict(sorted(counts["prefix"]["named_breaks"].items())),
        },
        "provider_cache": {
            **counts["provider_cache"],
            "misses_by_class": dict(sorted(counts["provider_cache"]["misses_by_class"].items())),
        },
    }


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 1.0
