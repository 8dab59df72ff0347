"""`app.domain.prompt_cache`: the class of a provider's cache outcome, and the terms' overrides."""

from __future__ import annotations

from app.domain.prompt_cache import CACHE_TERMS, classify_outcome

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
