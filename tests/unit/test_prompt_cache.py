"""`app.domain.prompt_cache`: the class of a provider's cache outcome, the terms' overrides, and
the price of a compaction given the cache's state."""

from __future__ import annotations

from app.domain.prompt_cache import (
    CACHE_TERMS,
    HORIZON_CALLS,
    CacheStanding,
    CompactionPrice,
    classify_outcome,
    price_compaction,
)

OPENAI = CACHE_TERMS["openai"]


def _class(
    cached: int, *, predicted: tuple[int, int] = (4000, 4200), idle: float | None = 10
) -> str:
    return classify_outcome(predicted=predicted, cached=cached, idle_seconds=idle, terms=OPENAI)


def test_within_the_predicted_range_and_a_block_is_as_predicted() -> None:
    # From the assembled part alone to it and the request's overhead, a 128-token block either side.
    assert (
        _class(4000) == _class(4200) == _class(4000 - 128) == _class(4200 + 128) == ("as_predicted")
    )
    assert _class(4200 + 129) == "more_than_predicted"


def test_less_than_predicted_is_told_by_size_then_by_idle_time() -> None:
    assert _class(0, predicted=(800, 900)) == "below_minimum"
    assert _class(0, idle=301) == "expired"  # OpenAI's five minutes
    assert _class(0, idle=299) == "evicted"
    assert _class(0, idle=None) == "evicted"  # the lineage's first call: nothing to expire
    assert _class(0, predicted=(0, 0)) == "as_predicted"


def test_a_sessions_overrides_replace_only_the_terms_they_name() -> None:
    bought = OPENAI.with_overrides({"ttl_seconds": 86_400, "unknown": 1})
    assert (bought.ttl_seconds, bought.minimum_prefix, bought.block) == (86_400, 1024, 128)
    assert classify_outcome(predicted=(4000, 4200), cached=0, idle_seconds=3600, terms=bought) == (
        "evicted"
    )


ANTHROPIC = CACHE_TERMS["anthropic"]  # reads at 0.1, writes at 1.25, five minutes


def _price(idle: float | None, **overrides: float) -> CompactionPrice:
    return price_compaction(
        CacheStanding(ANTHROPIC.with_overrides(overrides), idle_seconds=idle),
        context=9_000,
        product=2_500,
        ceiling=9_000,
        growth=500,
    )


def test_a_warm_cache_prices_the_compaction_by_the_prefix_it_rewrites() -> None:
    # Over the 13 calls the compacted context takes to grow back to the ceiling, each of the
    # 6,500 tokens taken off would have been read at 0.1; the 2,500 kept are written at 1.25
    # where they would have been read at 0.1.
    assert _price(60) == CompactionPrice(
        cache="warm",
        idle_seconds=60,
        ttl_seconds=300,
        horizon_calls=13,
        reduction_tokens=6_500,
        saving=8_450.0,
        cost=2_875.0,
        at_least_tokens=2_212,
    )
    assert _price(60).worth_it


def test_a_cold_or_empty_cache_costs_nothing_to_compact() -> None:
    cold = _price(301)
    assert (cold.cache, cold.cost, cold.at_least_tokens) == ("cold", 0.0, 0)
    # The first call writes the whole context anyway: the reduction saves the write price.
    assert cold.saving == 15_925.0  # 6,500 × (1.25 + 12 × 0.1)
    assert _price(None).cache == "empty"  # the lineage's first call
    assert _price(60, minimum_prefix=10_000).cache == "empty"  # below the provider's minimum


def test_a_bought_ttl_keeps_the_cache_warm_longer() -> None:
    assert _price(301, ttl_seconds=3_600).cache == "warm"


def test_a_compaction_that_saves_less_than_it_rewrites_is_not_worth_it() -> None:
    # The context grows back in 2 calls: 6,500 × (0.1 + 0.1) saved against 2,875.
    fast = price_compaction(
        CacheStanding(ANTHROPIC, idle_seconds=60),
        context=9_000,
        product=2_500,
        ceiling=9_000,
        growth=3_000,
    )
    assert (fast.horizon_calls, fast.saving, fast.cost) == (2, 1_300.0, 2_875.0)
    assert not fast.worth_it
    assert fast.at_least_tokens == 14_375  # more than the whole context: never worth it


def test_without_growth_the_price_runs_over_a_fixed_horizon() -> None:
    flat = price_compaction(
        CacheStanding(ANTHROPIC, idle_seconds=60),
        context=9_000,
        product=2_500,
        ceiling=9_000,
        growth=0,
    )
    assert flat.horizon_calls == HORIZON_CALLS


def test_free_cache_reads_make_no_reduction_worth_a_rewrite() -> None:
    free = _price(60, read_price=0.0, write_price=1.0)
    assert (free.saving, free.cost, free.at_least_tokens, free.worth_it) == (
        0.0,
        2_500.0,
        None,
        False,
    )
    nothing = _price(60, read_price=0.0, write_price=0.0)
    assert (nothing.saving, nothing.cost, nothing.at_least_tokens) == (0.0, 0.0, 0)
