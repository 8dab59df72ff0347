"""The replay's provider and clock (`bench/replay.py`): the prompt-cache terms of the provider
the sessions are told of and the evaluation simulates (`app.domain.cache_simulation`), and the
clock the log is appended on, which the service reads too (`create_app`'s `clock`) and so
records with each fact: the calls are `STEP_SECONDS` apart, with a pause of `PAUSE_SECONDS`
every `PAUSE_EVERY` calls where the replay injects idle gaps (the trajectories carry no
timestamps).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

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
    """How the replay spaces a run's calls on its clock."""

    clock: SimulatedClock
    pauses: bool = False
    """A pause of `PAUSE_SECONDS` before every `PAUSE_EVERY`th call."""

    def before_call(self, number: int) -> None:
        pause = self.pauses and number > 0 and number % PAUSE_EVERY == 0
        self.clock.advance(PAUSE_SECONDS if pause else STEP_SECONDS)

    @property
    def seconds(self) -> float:
        return self.clock.now.timestamp()
