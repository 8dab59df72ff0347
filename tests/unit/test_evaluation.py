"""A variant's figures (`app.domain.evaluation`): what one call adds, and several replays'
figures combined as the tallies of all their calls would give them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.evaluation import ServiceAnswer, VariantTally, combined
from app.domain.grounding import Grounding
from app.domain.prompt_cache import CACHE_TERMS

TERMS = CACHE_TERMS["anthropic"]


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _grounding(needed: int, visible: int) -> Grounding:
    names = [f"name_{n}" for n in range(needed)]
    return Grounding(
        needed=frozenset(names),
        visible=frozenset(names[:visible]),
        recallable=dict.fromkeys(names[visible:], 0),
    )


# One call: how many messages (each 600 tokens, the first the goal's), the identifiers it needs
# and shows, the service's predicted reuse, and whether it named a break.
CALLS = st.lists(
    st.tuples(
        st.integers(1, 6),
        st.integers(0, 4),
        st.integers(0, 4),
        st.integers(0, 4_000),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


def _tally(calls: list[tuple[int, int, int, int, bool]], *, start: float = 0.0) -> VariantTally:
    tally = VariantTally(window=2_500, terms=TERMS)
    for number, (length, needed, visible, predicted, broke) in enumerate(calls):
        messages = [_message("the goal"), *(_message(f"turn {n}") for n in range(1, length))]
        grounding = _grounding(needed, min(visible, needed))
        served = tally.call(
            messages,
            [600] * length,
            at=start + 5.0 * number,
            goal="the goal",
            grounding=grounding,
            elided_forms=["dropped"] if grounding.recallable else [],
            service=ServiceAnswer(
                predicted_reused=predicted,
                restated=7,
                history_cut=length > 4,
                named_break="history_changed" if broke else None,
                history_end=length,
                seqs_named=True,
            ),
        )
        if served.cached < predicted:
            tally.classified("mispredicted" if number % 2 else None)
        for _ in grounding.recallable:
            tally.recall_checked_for(number % 3 != 0)
        tally.graded({"needed": needed, "visible": visible, "all_visible": visible >= needed})
    return tally


def test_one_call_adds_what_it_sent_and_what_the_service_said_of_it() -> None:
    tally = VariantTally(window=1_000, terms=TERMS)
    first = [_message("the goal"), _message("a"), _message("b")]
    tally.call(
        first,
        [600, 300, 200],
        at=0.0,
        goal="the goal",
        grounding=_grounding(2, 1),
        elided_forms=["summarized"],
        service=ServiceAnswer(
            predicted_reused=0,
            restated=12,
            history_cut=False,
            named_break=None,
            history_end=3,
            seqs_named=False,
        ),
    )
    served = tally.call(
        [first[0], _message("c")],
        [600, 100],
        at=5.0,
        goal="the goal",
        grounding=_grounding(1, 1),
        service=ServiceAnswer(
            predicted_reused=1_100,
            restated=12,
            history_cut=True,
            named_break="history_changed",
            history_end=2,
            seqs_named=True,
        ),
    )

    # The second call shares only the goal's message with the first: 600 reused of 700, and
    # the cache (a 1,024-token minimum) serves nothing of it, less than the 1,100 predicted.
    assert (served.input, served.cached) == (700, 0)
    figures = tally.figures()
    assert figures == {
        **figures,
        "calls": 2,
        "input_tokens": 1_800,
        "reused_tokens": 600,
        "reuse": round(600 / 1_800, 4),
        "fresh_tokens": 1_200,
        "cached_tokens": 0,
        "peak_tokens": 1_100,
        "goal_calls": 2,
        "goal_kept_calls": 2,
        "over_budget_calls": 1,
        "predicted_reused_tokens": 1_100,
        "restated_tokens": 24,
        "history_cut_calls": 1,
        "prefix": {"left_history_calls": 1, "named_breaks": {"history_changed": 1}},
    }
    assert figures["grounding"] == {
        **figures["grounding"],
        "calls_needing": 2,
        "needed": 3,
        "visible": 2,
        "recallable": 1,
        "missed": 0,
        "calls_seeing_all": 1,
        "misses_by_form": {"summarized": 1},
        "calls_hiding": 1,
        "calls_naming_every_seq": 0,
    }
    # The prediction (1,100 tokens, whole blocks of 1 above the minimum) against nothing served.
    assert figures["provider_cache"]["predicted_unexpired_tokens"] == 1_100
    assert figures["provider_cache"]["cached_unexpired_tokens"] == 0


@settings(max_examples=60, deadline=None)
@given(CALLS, CALLS)
def test_combined_figures_are_the_sum_of_the_replays(
    first: list[tuple[int, int, int, int, bool]], second: list[tuple[int, int, int, int, bool]]
) -> None:
    one, other = _tally(first), _tally(second)
    together = combined([one.figures(), other.figures()])

    assert combined([one.figures()]) == one.figures()
    counts = ("calls", "input_tokens", "reused_tokens", "fresh_tokens", "cached_tokens")
    for key in (*counts, "written_tokens", "compactions", "goal_kept_calls", "restated_tokens"):
        assert together[key] == one.figures()[key] + other.figures()[key], key
    assert together["peak_tokens"] == max(one.peak_tokens, other.peak_tokens)
    assert together["reuse"] == round(
        (one.reused_tokens + other.reused_tokens) / (one.input_tokens + other.input_tokens), 4
    )
    assert together["cost"] == round(one.cost + other.cost, 1)
    grounding = together["grounding"]
    assert grounding["needed"] == one.needed + other.needed
    assert (
        grounding["missed"] == grounding["needed"] - grounding["visible"] - grounding["recallable"]
    )
    assert grounding["misses_by_form"] == {
        form: count
        for form, count in {
            "dropped": one.recallable_by_form["dropped"] + other.recallable_by_form["dropped"]
        }.items()
        if count
    }
    assert grounding["graded"]["needed"] == one.graded_needed + other.graded_needed
    assert grounding["recall_confirmed"] == one.recall_confirmed + other.recall_confirmed
    cache = together["provider_cache"]
    assert cache["misses"] == one.misses + other.misses
    assert sum(cache["misses_by_class"].values()) + cache["unclassified_misses"] == cache["misses"]
    breaks = together["prefix"]["named_breaks"]
    assert sum(breaks.values()) == sum(one.named_breaks.values()) + sum(other.named_breaks.values())
