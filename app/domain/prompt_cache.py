"""What providers' prompt caches cost and keep (`CACHE_TERMS`, one home for it), and the class
of a provider's cache outcome against the service's prediction (`classify_outcome`).

Invariants: `classify_outcome` is a pure function of its arguments; every report gets exactly
one class of `CacheOutcome`; a report within one cache block (or 2%) of the predicted range is
`as_predicted`, whatever else holds.

The terms are the providers' published ones (docs/prompt-cache.md names the sources); a
session may override any of them (its `cache` setting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

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
