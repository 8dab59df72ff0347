"""Compaction advice from window pressure, growth and behaviour signals."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.advice import (
    RECENT_TURNS,
    Advice,
    AdviceSignal,
    Watermarks,
    advise,
    history_figures,
    keeps_needing_what_was_hidden,
    question_key,
)
from app.domain.items import Item
from app.domain.prompt_cache import CACHE_TERMS, CacheStanding
from app.domain.world_state import render_goal
from tests.builders import assistant_msg, tool_call, tool_output, user_msg

TALK = [user_msg("Add a CSV export."), assistant_msg("On it.")]


def with_outputs(*outputs: str) -> list[Item]:
    items: list[Item] = [user_msg("Fix the build.")]
    for number, output in enumerate(outputs):
        items += [
            tool_call(f"c{number}", "bash", json.dumps({"command": "make"})),
            tool_output(f"c{number}", output),
        ]
    return items


def advice_of(
    history: Sequence[Item],
    *,
    active_tokens: int,
    window: int = 100_000,
    phases: Sequence[str | None] = (),
    turn_tokens: Sequence[int] = (),
    grown_since_compaction: int | None = None,
    maskable_tokens: int | None = None,
    cache: CacheStanding | None = None,
) -> Advice:
    """Advice for `history` with its figures set: `active_tokens` all told, the recent
    `turn_tokens`, what masking frees (default: all of it)."""
    figures = replace(
        history_figures(history, [0] * len(history)),
        history_tokens=active_tokens,
        turn_tokens=tuple(turn_tokens)[-RECENT_TURNS:],
        maskable_tokens=active_tokens if maskable_tokens is None else maskable_tokens,
    )
    set_phases = [phase for phase in phases[:-1] if phase is not None]
    return advise(
        figures,
        pinned_tokens=0,
        window=window,
        phases=(phases[-1] if phases else None, set_phases[-1] if set_phases else None),
        grown_since_compaction=grown_since_compaction,
        cache=cache,
    )


def calm(
    history: Sequence[Item],
    *,
    active_tokens: int = 10_000,
    phases: Sequence[str | None] = (),
    turn_tokens: Sequence[int] = (),
) -> Advice:
    """Advice for a 100k window."""
    return advice_of(history, active_tokens=active_tokens, phases=phases, turn_tokens=turn_tokens)


def test_a_roomy_window_with_no_signal_gives_no_advice() -> None:
    assert calm(TALK, turn_tokens=[1_000, 3_000]) == Advice(
        should_compact=False,
        pressure=0.1,
        reasons=(),
        turns_until_full=45,
        recommended_strategy=None,
        active_tokens=10_000,
    )


def test_window_pressure_recommends_masking_when_tool_outputs_dominate() -> None:
    history = with_outputs("x" * 5_000, "y" * 5_000)

    assert calm(history, active_tokens=95_000) == Advice(
        should_compact=True,
        pressure=0.95,
        reasons=(
            AdviceSignal(
                "window_pressure",
                "the active history fills 95% of the window (threshold 90%)",
                0.95,
            ),
        ),
        turns_until_full=None,
        recommended_strategy="clear_tool_results",
        active_tokens=95_000,
    )


def test_a_history_without_model_output_is_not_advised_to_compact() -> None:
    # A long task statement alone fills the window: every strategy would keep it as it is.
    assert calm([user_msg("z" * 5_000)], active_tokens=95_000) == Advice(
        should_compact=False,
        pressure=0.95,
        reasons=(
            AdviceSignal(
                "window_pressure",
                "the active history fills 95% of the window (threshold 90%)",
                0.95,
            ),
        ),
        turns_until_full=None,
        recommended_strategy=None,
        active_tokens=95_000,
    )


def test_window_pressure_recommends_a_summary_when_tool_outputs_are_a_small_share() -> None:
    history = [*TALK, user_msg("z" * 5_000), *with_outputs("ok")]

    assert calm(history, active_tokens=92_000).recommended_strategy == "summary"


def test_the_same_error_in_three_recent_outputs_is_a_repeated_error() -> None:
    history = with_outputs(
        "error: port 8001 in use", "ok", "error: port 8002 in use", "error: port 8003 in use"
    )

    assert calm(history, active_tokens=60_000).reasons == (
        AdviceSignal(
            "repeated_error",
            "the error 'error: port N in use' came back in 3 of the last 10 outputs",
            3.0,
        ),
    )
    assert calm(history, active_tokens=60_000).should_compact
    # Below half the window a loop alone does not justify a cache rewrite.
    assert not calm(history, active_tokens=40_000).should_compact


def test_the_same_user_question_twice_is_a_repeated_question() -> None:
    history = [
        user_msg("Where is the config?"),
        assistant_msg("Here."),
        user_msg("where is the CONFIG"),
    ]

    assert calm(history).reasons == (
        AdviceSignal(
            "repeated_question", "the user asked the same thing 2 times: 'where is the config'", 2.0
        ),
    )


def test_a_new_phase_after_the_previous_non_null_phase_is_a_phase_change() -> None:
    assert calm(TALK, phases=["explore", None, "implement"]).reasons == (
        AdviceSignal("phase_change", "the phase changed from 'explore' to 'implement'", 1.0),
    )
    assert calm(TALK, phases=["explore", "implement", "implement"]).reasons == ()
    assert calm(TALK, phases=["explore", None]).reasons == ()


def test_growth_that_fills_the_window_at_the_next_turn_advises_compaction() -> None:
    turns = [1, 10_000, 10_000, 10_000, 10_000, 10_000]
    advice = calm(TALK, active_tokens=82_000, turn_tokens=turns)

    assert (advice.turns_until_full, advice.should_compact) == (1, True)
    assert advice.reasons == (
        AdviceSignal("growth", "at 10000 tokens per turn the window is full in 1 turns", 10_000.0),
    )
    # Two turns of room left: not yet.
    assert not calm(TALK, active_tokens=75_000, turn_tokens=turns).should_compact


def test_advice_serializes_to_the_api_shape() -> None:
    advice = calm(TALK, phases=["a", "b"])

    assert advice.as_dict() == {
        "should_compact": False,
        "pressure": 0.1,
        "reasons": [
            {"signal": "phase_change", "detail": "the phase changed from 'a' to 'b'", "value": 1.0}
        ],
        "turns_until_full": None,
        "recommended_strategy": None,
        "cache": None,
    }


def _referencequestion_key(text: str) -> str:
    """The question key as first written: non-word runs to spaces, then whitespace collapsed."""
    return " ".join(re.sub(r"[^\w]+", " ", text.casefold()).split())


_QUESTION_PIECES = ["Where", "CONFIG", "ǅ", "ß", "İ", "_", "7", "?", " ", "\t", "\x1c", "\u2028"]


@settings(max_examples=300)
@given(
    pieces=st.lists(st.sampled_from(_QUESTION_PIECES) | st.text(max_size=4), max_size=15),
    repeat=st.integers(min_value=1, max_value=400),
)
def test_question_keys_are_the_case_folded_words_memoised_or_not(
    pieces: list[str], repeat: int
) -> None:
    # `repeat` takes some texts past the memo's size bound.
    long_text = "".join(pieces) * repeat
    expected = _referencequestion_key(long_text)

    assert question_key(long_text) == expected
    assert question_key(long_text) == expected  # a memo hit gives the same key


LOOPING = with_outputs(
    "error: port 8001 in use", "error: port 8002 in use", "error: port 8003 in use"
)


def test_right_after_a_compaction_only_the_high_watermark_advises_another() -> None:
    # A loop at 60% of the window advises a compaction in a session never compacted...
    assert calm(LOOPING, active_tokens=60_000).should_compact
    # ...but not once one has been written and the history has grown by less than the span
    # between the watermarks (65% of the window at the defaults) since.
    after = advice_of(
        LOOPING, active_tokens=60_000, turn_tokens=[5_000] * 5, grown_since_compaction=35_000
    )
    assert (after.should_compact, after.recommended_strategy) == (False, None)
    assert [reason.signal for reason in after.reasons] == ["repeated_error"]
    # Back at the high watermark (the product itself does not fit), it is advised again.
    full = advice_of(LOOPING, active_tokens=91_000, grown_since_compaction=0)
    assert full.should_compact
    assert [reason.signal for reason in full.reasons] == ["window_pressure", "repeated_error"]


def test_masking_that_cannot_reach_the_low_watermark_escalates_to_a_summary() -> None:
    history = with_outputs("x" * 5_000, "y" * 5_000)

    def strategy(maskable: int) -> str | None:
        return advice_of(
            history, active_tokens=95_000, maskable_tokens=maskable
        ).recommended_strategy

    # 95k less 75k maskable is 20k, within the low watermark (25k): masking will do.
    assert strategy(75_000) == "clear_tool_results"
    # 95k less 40k is 55k: masking alone leaves the window more than half full.
    assert strategy(40_000) == "summary"


def test_watermarks_are_ordered_shares_of_the_window() -> None:
    assert Watermarks(high=0.8, low=0.3).target(10_000) == 3_000
    assert Watermarks(high=0.8, low=0.3).span(10_000) == 5_000
    for high, low in [(0.5, 0.5), (0.4, 0.6), (1.2, 0.3), (0.9, 0.0)]:
        with pytest.raises(ValueError, match="watermarks need"):
            Watermarks(high=high, low=low)


def test_session_advice_weighs_the_pinned_state_and_not_the_fragments_in_the_history() -> None:
    goal = render_goal("Ship the CSV export.", version=1)
    history = [goal, *with_outputs("a" * 100, "b" * 100, "c" * 100, "d" * 100)]
    sizes = [50, 10, 5, 1_000, 5, 1_000, 5, 1_000, 5, 1_000]

    advice = advise(history_figures(history, sizes), pinned_tokens=500, window=5_000)

    # 4,030 tokens of history (the goal fragment left out) and 500 pinned: 90.6% of 5,000.
    assert advice.pressure == 4_530 / 5_000
    assert advice.should_compact
    # One output of four can be masked (the newest three are kept): 4,530 − 960 is above a
    # quarter of the window, so a summary is advised.
    assert advice.recommended_strategy == "summary"


def graded(needed: int, visible: int) -> dict[str, int]:
    return {"needed": needed, "visible": visible}


def test_a_session_keeps_needing_what_was_hidden_from_a_tenth_of_five_graded_calls() -> None:
    # 5 of the 50 identifiers the last five calls needed were hidden: a tenth.
    assert keeps_needing_what_was_hidden([graded(10, 9)] * 5)
    assert not keeps_needing_what_was_hidden([graded(10, 10)] * 4 + [graded(10, 6)])
    assert not keeps_needing_what_was_hidden([graded(10, 10), *[graded(10, 9)] * 4])
    # Calls that needed nothing say nothing, and four graded calls are too few to judge.
    assert keeps_needing_what_was_hidden([graded(0, 0), *[graded(10, 9)] * 5])
    assert not keeps_needing_what_was_hidden([graded(10, 0)] * 4)
    # Only the newest five count.
    assert not keeps_needing_what_was_hidden([graded(10, 10)] * 5 + [graded(10, 0)])
    assert Watermarks(high=0.9, low=0.25).relaxed() == Watermarks(high=0.9, low=0.575)


ANTHROPIC = CACHE_TERMS["anthropic"]


def _priced(
    history: list[Item], active_tokens: int, *, turn: int, cache: CacheStanding | None
) -> Advice:
    """Advice for a 100k window whose tool outputs have nothing left to mask."""
    return advice_of(
        history, active_tokens=active_tokens, turn_tokens=[turn], maskable_tokens=0, cache=cache
    )


def _cached(idle: float | None, **overrides: float) -> CacheStanding:
    return CacheStanding(ANTHROPIC.with_overrides(overrides), idle_seconds=idle)


def test_a_cold_cache_advises_compacting_below_the_high_watermark() -> None:
    warm = _priced(with_outputs("ok"), 60_000, turn=2_000, cache=_cached(60))
    assert (warm.should_compact, warm.reasons) == (False, ())
    assert warm.price is not None
    assert warm.price.cache == "warm"

    cold = _priced(with_outputs("ok"), 60_000, turn=2_000, cache=_cached(301))
    assert cold.should_compact
    assert cold.recommended_strategy == "summary"
    assert [reason.as_dict() for reason in cold.reasons] == [
        {
            "signal": "cache_cold",
            "detail": "the provider's prompt cache expired (the last call was 301 s ago,"
            " TTL 300 s): compacting now throws nothing cached away",
            "value": 301.0,
        }
    ]
    # The price is stated with the advice: 35,000 tokens off over the 32 calls the compacted
    # context (25,000) takes to grow back to 90,000 at 2,000 a call; nothing cached is lost.
    assert cold.as_dict()["cache"] == {
        "state": "cold",
        "idle_seconds": 301,
        "ttl_seconds": 300,
        "horizon_calls": 32,
        "reduction_tokens": 35_000,
        "saving": 35_000 * (1.25 + 31 * 0.1),
        "cost": 0.0,
        "at_least_tokens": 0,
    }


def test_a_cold_cache_is_no_reason_for_a_small_reduction_or_without_a_discount() -> None:
    # From 31,000 to the low watermark's 25,000: less than a tenth of the 65,000-token span.
    assert not _priced(with_outputs("ok"), 31_000, turn=2_000, cache=_cached(301)).should_compact
    assert _priced(with_outputs("ok"), 31_500, turn=2_000, cache=_cached(301)).should_compact
    # Cached tokens priced as fresh ones: the advice is weighed by tokens alone.
    no_discount = _cached(301, read_price=1.0, write_price=1.0)
    flat = advice_of(
        with_outputs("ok"), active_tokens=60_000, turn_tokens=[2_000], cache=no_discount
    )
    assert (flat.should_compact, flat.reasons) == (False, ())


def test_a_signal_does_not_advise_a_compaction_that_costs_more_than_it_saves() -> None:
    failing = with_outputs(*[f"error: port {port} in use" for port in (8001, 8002, 8003)])
    # The context grows 20,000 a call: the 25,000-token product is back at 90,000 in 3 calls,
    # too few to earn back writing it at 1.25 instead of reading it at 0.1.
    warm = _priced(failing, 60_000, turn=20_000, cache=_cached(60))
    assert [reason.signal for reason in warm.reasons] == ["repeated_error"]
    assert warm.price is not None
    assert not warm.price.worth_it
    assert not warm.should_compact
    # Unpriced (no cache known), or once the cache has gone cold, the same signal advises it.
    assert _priced(failing, 60_000, turn=20_000, cache=None).should_compact
    assert _priced(failing, 60_000, turn=20_000, cache=_cached(301)).should_compact
    # Under window pressure a compaction is advised whatever it costs.
    assert _priced(failing, 91_000, turn=20_000, cache=_cached(60)).should_compact
