"""`app.domain.assemble.cache_break`: when a break is named at all, and what its state keeps."""

from __future__ import annotations

from dataclasses import replace

from app.domain.assemble import BreakItem, PrefixState, explain_break, frames_match

STATE = PrefixState(
    output_format="responses",
    tools="t1",
    override="o1",
    sources=("docs",),
    compactions=0,
    compaction_id=None,
    retractions=0,
    reset_at=0,
    goal_version=1,
    world_version=1,
    excluded=0,
    cut_seq=1,
    history_start=2,
    history_end=6,
    as_of_seq=9,
)


def _explain(previous: PrefixState | None, current: PrefixState, reused: int) -> str | None:
    brk = explain_break(
        previous,
        current,
        reused_items=reused,
        at=BreakItem(f"history:{reused}", "history", reused),
        history_source="history",
        notice_source="elision",
    )
    return None if brk is None else brk.cause


def test_only_a_prefix_ending_inside_the_previous_history_is_a_break() -> None:
    # What follows the history (world state after it, the restated goal) moves as it grows.
    assert _explain(STATE, STATE, reused=6) is None
    assert _explain(STATE, STATE, reused=7) is None
    assert _explain(STATE, STATE, reused=5) == "window_cut"
    assert _explain(None, STATE, reused=0) is None  # nothing to compare with


def test_the_state_reads_back_and_another_version_is_not_compared() -> None:
    stored = replace(STATE, compaction_id="cmp_1").stored()
    assert PrefixState.read(stored) == STATE  # the compaction's id is not kept
    assert PrefixState.read([0, *stored[1:]]) is None
    assert PrefixState.read(stored[:-1]) is None
    assert PrefixState.read(None) is None


def test_what_frames_every_item_breaks_the_whole_prefix() -> None:
    assert frames_match(None, STATE)
    assert frames_match(STATE, replace(STATE, goal_version=2))
    assert not frames_match(STATE, replace(STATE, tools=None))
    assert not frames_match(STATE, replace(STATE, output_format="chat"))


def test_the_causes_are_tried_in_order() -> None:
    changed = replace(STATE, output_format="chat", compactions=1, compaction_id="cmp_1", cut_seq=40)
    assert _explain(STATE, changed, reused=3) == "output_format"
    assert _explain(STATE, replace(changed, output_format="responses"), reused=3) == "compaction"
    assert _explain(STATE, replace(STATE, reset_at=8), reused=3) == "retracted"
    assert _explain(STATE, replace(STATE, sources=()), reused=3) == "override"
