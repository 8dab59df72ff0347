"""A provider's prompt cache, simulated, for the replay (`bench/replay.py`): what a call's
prompt would find cached and what it costs in the provider's terms
(`app.domain.cache_simulation`, which the service's evaluations use too), and the service's
prediction and classification of it beside that. Tokens are the service's own count of each
item, so the prediction it makes is judged on what it can know: which items a provider would
find cached.

Time is the replay's clock (`SimulatedClock`), which the service reads too (`create_app`'s
`clock`): the calls are `STEP_SECONDS` apart, with a pause of `PAUSE_SECONDS` every
`PAUSE_EVERY` calls where the replay injects idle gaps (the trajectories carry no timestamps).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from app.domain.cache_simulation import Served
from app.domain.prompt_cache import CACHE_TERMS, CacheTerms

STEP_SECONDS = 5.0
"""The time between two calls of a run without a pause: a model call and a tool's run."""
PAUSE_SECONDS = 600.0
PAUSE_EVERY = 40

PROVIDER = CACHE_TERMS["anthropic"]
"""The simulated provider: Anthropic's 5-minute cache (a write premium of 1.25, reads at 0.1)."""
BLIND = {"read_price": 1.0, "write_price": 1.0}
"""Session cache terms with no discount: the service then prices no cache, and its advice is
the one weighed by tokens alone (what it gave before it priced the cache)."""


def session_terms(terms: CacheTerms) -> dict[str, Any]:
    """`terms` as a session's `cache` setting."""
    return {
        "read_price": terms.read_price,
        "write_price": terms.write_price,
        "ttl_seconds": terms.ttl_seconds,
        "minimum_prefix": terms.minimum_prefix,
        "block": terms.block,
    }


class SimulatedClock:
    """A clock the replay moves on: `clock()` is the time now."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class CacheTally:
    """A manager's calls as the simulated provider served them, and the service's prediction
    and classification beside them."""

    calls: int = 0
    input: int = 0
    cached: int = 0
    written: int = 0
    cost: float = 0.0
    expired_calls: int = 0
    predicted_unexpired: int = 0
    cached_unexpired: int = 0
    misses: int = 0
    """Calls the simulated provider served less than the service predicted."""
    classes: Counter[str] = field(default_factory=Counter)
    """The service's class of each of those misses (`cache_outcome`)."""
    unclassified: int = 0

    def call(self, served: Served, *, predicted: int, terms: CacheTerms) -> None:
        """Add one call, `predicted` the service's reused prefix: what it expects the provider
        to serve is that, under the same minimum prefix and blocks (a prefix below the minimum
        is classified `below_minimum`, not mispredicted)."""
        if predicted < terms.minimum_prefix:
            predicted = 0
        predicted -= predicted % terms.block
        self.calls += 1
        self.input += served.input
        self.cached += served.cached
        self.written += served.written
        self.cost += served.cost(terms)
        self.expired_calls += served.expired
        if not served.expired:
            self.predicted_unexpired += predicted
            self.cached_unexpired += served.cached

    def classified(self, outcome: str | None, *, missed: bool) -> None:
        if not missed:
            return
        self.misses += 1
        if outcome is None:
            self.unclassified += 1
        else:
            self.classes[outcome] += 1

    def add(self, other: CacheTally) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def row(self, label: str) -> str:
        agreement = (
            self.predicted_unexpired / self.cached_unexpired - 1
            if self.cached_unexpired
            else float(self.predicted_unexpired > 0)
        )
        classes = ", ".join(f"{k} {v}" for k, v in sorted(self.classes.items())) or "none"
        return (
            f"{label:<52} {self.calls:>5} {self.cached / max(self.input, 1):>7.1%} "
            f"{self.written:>10,} {self.cost:>11,.0f} {self.expired_calls:>7} "
            f"{agreement:>+8.2%} {self.misses - self.unclassified:>4}/{self.misses:<4} {classes}"
        )


CACHE_HEADER = (
    f"{'provider cache (simulated)':<52} {'calls':>5} {'cached':>7} {'written':>10} "
    f"{'cost':>11} {'expired':>7} {'pred-sim':>8} {'classified':>9} by class"
)
CACHE_LEGEND = (
    f"provider cache: {PROVIDER.ttl_seconds} s TTL, reads at {PROVIDER.read_price}, writes at"
    f" {PROVIDER.write_price}, minimum prefix {PROVIDER.minimum_prefix}; calls {STEP_SECONDS:.0f}"
    " s apart. cached: share of input the simulation served from its cache; cost: fresh + read"
    " price x cached + write premium x written; expired: calls an expired entry would have"
    " served more; pred-sim: the service's predicted reused prefix against the simulation's"
    " cached tokens, over the calls without expiry; classified: the simulated misses (less"
    " served than predicted) the service classified, of all"
)


@dataclass(frozen=True)
class Timing:
    """How the replay spaces a run's calls on its clock, and the cache terms its sessions tell
    the service (`bench.provider_cache`)."""

    clock: SimulatedClock
    pauses: bool = False
    """A pause of `PAUSE_SECONDS` before every `PAUSE_EVERY`th call."""
    session_cache: Mapping[str, Any] = field(default_factory=lambda: session_terms(PROVIDER))

    def before_call(self, number: int) -> None:
        pause = self.pauses and number > 0 and number % PAUSE_EVERY == 0
        self.clock.advance(PAUSE_SECONDS if pause else STEP_SECONDS)

    @property
    def seconds(self) -> float:
        return self.clock.now.timestamp()
