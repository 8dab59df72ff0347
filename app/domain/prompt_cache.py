"""What providers' prompt caches cost and keep (`CACHE_TERMS`, one home for it), the class of
a provider's cache outcome against the service's prediction (`classify_outcome`), and what a
compaction saves and costs given the cache's state (`price_compaction`).

Invariants: `classify_outcome` and `price_compaction` are pure functions of their arguments;
every report gets exactly one class of `CacheOutcome`; a report within one cache block (or 2%)
of the predicted range is `as_predicted`, whatever else holds. A compaction of a cold or empty
cache costs nothing (nothing cached is thrown away); with a read price equal to the write
price (no cache discount) it never costs anything either, and the advice is the token-only one.

The terms are the providers' published ones (docs/prompt-cache.md names the sources); a
session may override any of them (its `cache` setting).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:  # calibration imports the advice, which prices with this module
    from app.domain.calibration import Family

CacheOutcome = Literal["as_predicted", "below_minimum", "expired", "evicted", "more_than_predicted"]
CACHE_OUTCOMES: tuple[CacheOutcome, ...] = get_args(CacheOutcome)
MISSES: frozenset[CacheOutcome] = frozenset({"below_minimum", "expired", "evicted"})
"""The outcomes where the provider served less than predicted."""


@dataclass(frozen=True)
class CacheTerms:
    """A provider's prompt cache, for one model family: prices as shares of a fresh input
    token's, sizes in the provider's tokens."""

    read_price: float
    """What a cached input token costs."""
    write_price: float
    """What writing a token into the cache costs (1.0: no premium)."""
    ttl_seconds: int
    """How long an entry lives unused, as chosen (the provider's default unless overridden)."""
    minimum_prefix: int
    """The shortest prefix the provider caches at all."""
    block: int
    """The granularity a cache hit is counted in."""

    def with_overrides(self, overrides: Mapping[str, Any]) -> CacheTerms:
        """These terms with the fields `overrides` names (a session's `cache` setting)."""
        names = {field.name for field in fields(self)}
        return replace(self, **{k: v for k, v in overrides.items() if k in names})


CACHE_TERMS: Mapping[Family, CacheTerms] = {
    # Automatic for prompts of 1,024 tokens and more, hits in 128-token steps; kept 5-10
    # minutes unused in memory (24 hours with extended retention); no write premium.
    "openai": CacheTerms(
        read_price=0.1, write_price=1.0, ttl_seconds=300, minimum_prefix=1024, block=128
    ),
    # Explicit breakpoints; 5 minutes (writes at 1.25x) or 1 hour (2x); 1,024 tokens for most
    # Sonnet and Opus models (2,048 or 4,096 for some: override `minimum_prefix`).
    "anthropic": CacheTerms(
        read_price=0.1, write_price=1.25, ttl_seconds=300, minimum_prefix=1024, block=1
    ),
    # Implicit caching on Gemini 2.5 and later: 2,048 tokens on 2.5 (4,096 on later models),
    # no write premium; Google publishes no TTL for it, a few minutes is assumed.
    "google": CacheTerms(
        read_price=0.1, write_price=1.0, ttl_seconds=300, minimum_prefix=2048, block=1
    ),
    "other": CacheTerms(
        read_price=0.1, write_price=1.0, ttl_seconds=300, minimum_prefix=1024, block=1
    ),
}


def classify_outcome(
    *, predicted: tuple[int, int], cached: int, idle_seconds: float | None, terms: CacheTerms
) -> CacheOutcome:
    """The provider's `cached` tokens against the predicted reused prefix, in the provider's
    tokens: from its assembled part alone to that and the request's overhead (the framing and
    tool definitions a provider counts ahead of it), as `(least, most)`. `idle_seconds`: the
    time since the lineage's previous call (None: it had none)."""
    least, most = predicted
    tolerance = max(terms.block, most // 50)
    if cached > most + tolerance:
        return "more_than_predicted"
    if cached >= least - tolerance:
        return "as_predicted"
    if most < terms.minimum_prefix:
        return "below_minimum"
    if idle_seconds is not None and idle_seconds > terms.ttl_seconds:
        return "expired"
    return "evicted"


CacheState = Literal["warm", "cold", "empty"]
"""What the provider's cache holds of a lineage's context: its prefix (`warm`); nothing, because
the lineage's last call came longer ago than the TTL (`cold`); nothing, because there was no
call yet or the context is below the provider's minimum prefix (`empty`)."""

HORIZON_CALLS = 100
"""The calls a compaction is priced over when the context does not grow (no turn figures)."""


@dataclass(frozen=True)
class CacheStanding:
    """A lineage's prompt cache as its next call finds it: the session's terms and the seconds
    since the lineage's previous call (None: it had none)."""

    terms: CacheTerms
    idle_seconds: float | None

    def state(self, context_tokens: int) -> CacheState:
        """The cache's state for a context of `context_tokens` (what the call sends)."""
        if self.idle_seconds is None or context_tokens < self.terms.minimum_prefix:
            return "empty"
        return "cold" if self.idle_seconds > self.terms.ttl_seconds else "warm"

    @property
    def discounted(self) -> bool:
        """Whether a warm cache is worth keeping at all: a cached token costs less than one
        written afresh."""
        return self.terms.read_price < self.terms.write_price


@dataclass(frozen=True)
class CompactionPrice:
    """What compacting a context now saves and costs, in fresh input tokens (a fresh input
    token costs 1), over the `horizon_calls` calls before the compacted context grows back to
    where the next compaction comes.

    - `saving`: the reduction, not sent on any of those calls: read from the cache at the read
      price, or on the first call written at the write price when the cache holds nothing.
    - `cost`: a warm cache's prefix thrown away: the compacted context (the summary and what is
      kept) written at the write price where it would have been read; 0 when the cache is cold.
    - `at_least_tokens`: the least reduction whose saving meets the cost (None: none does, as
      when cached tokens cost nothing).
    """

    cache: CacheState
    idle_seconds: float | None
    ttl_seconds: int
    horizon_calls: int
    reduction_tokens: int
    saving: float
    cost: float
    at_least_tokens: int | None

    @property
    def worth_it(self) -> bool:
        return self.reduction_tokens > 0 and self.saving >= self.cost

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.cache,
            "idle_seconds": self.idle_seconds,
            "ttl_seconds": self.ttl_seconds,
            "horizon_calls": self.horizon_calls,
            "reduction_tokens": self.reduction_tokens,
            "saving": self.saving,
            "cost": self.cost,
            "at_least_tokens": self.at_least_tokens,
        }


def price_compaction(
    standing: CacheStanding, *, context: int, product: int, ceiling: int, growth: float
) -> CompactionPrice:
    """Prices compacting a context of `context` tokens down to `product` now, against leaving
    it: the compacted context grows by `growth` tokens per call until it reaches `ceiling`
    (where the next compaction comes), and both futures send the same new tokens on every
    call, so only the prefix differs."""
    terms = standing.terms
    state = standing.state(context)
    horizon = (
        max(1, min(HORIZON_CALLS, math.floor((ceiling - product) / growth)))
        if growth > 0
        else HORIZON_CALLS
    )
    first = terms.read_price if state == "warm" else terms.write_price
    per_token = first + (horizon - 1) * terms.read_price
    reduction = max(0, context - product)
    cost = (terms.write_price - terms.read_price) * product if state == "warm" else 0.0
    return CompactionPrice(
        cache=state,
        idle_seconds=None if standing.idle_seconds is None else round(standing.idle_seconds, 3),
        ttl_seconds=terms.ttl_seconds,
        horizon_calls=horizon,
        reduction_tokens=reduction,
        saving=round(reduction * per_token, 1),
        cost=round(cost, 1),
        at_least_tokens=math.ceil(cost / per_token) if per_token else None if cost else 0,
    )
