"""Properties of every compaction strategy over random histories and every real trajectory.

Whatever the strategy and parameters: pairing holds in the new history; it starts with the
invariants; the goal is still there verbatim (and in the product, when there is one); at most
one product exists, and re-compacting (into a summary, a handoff or notes) merges into exactly
one that carries what the earlier one had; the input is never mutated; the
same input gives the same result; a no-op returns the history as it came.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compaction import (
    HANDOFF_MARKER,
    NOTES_MARKER,
    PRODUCT_STRATEGIES,
    SUMMARY_MARKER,
    CompactionInput,
    CompactionParams,
    CompactionResult,
    Strategy,
    find_lost_identifiers,
    is_compaction_product,
    notes_of,
    plan_compaction,
    summary_of,
)
from app.domain.compaction.product import GOAL_PINNED_ABOVE, read_product
from app.domain.history import HistoryEntry
from app.domain.items import OUTPUT_TYPES, Item, visible_text
from app.domain.normalize import find_pairing_violations, normalize_history
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory

STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
DEFAULT_GOAL = "Ship the export feature."
MARKERS = (SUMMARY_MARKER, HANDOFF_MARKER, NOTES_MARKER)


def quarter_bytes(text: str) -> int:
    """A stand-in tokenizer: one token per started four UTF-8 bytes."""
    return (len(text.encode()) + 3) // 4


def developer_msg(text: str) -> Item:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def entries_of(items: Sequence[Item]) -> tuple[HistoryEntry, ...]:
    """The normalized history as the shell hands it over: seq = position in the log (from 1)."""
    normalized = normalize_history(items, count_tokens=quarter_bytes).items
    seq_of = {id(item): seq for seq, item in enumerate(items, start=1)}
    output_seq = {
        item.get("call_id"): seq
        for seq, item in enumerate(items, start=1)
        if item.get("type") in OUTPUT_TYPES
    }
    result: list[HistoryEntry] = []
    for item in normalized:
        if id(item) in seq_of:
            result.append(HistoryEntry(seq_of[id(item)], item))
        elif item.get("type") in OUTPUT_TYPES and item.get("call_id") in output_seq:
            result.append(HistoryEntry(output_seq[item["call_id"]], item, verbatim=False))  # cut
        else:
            result.append(HistoryEntry(None, item, verbatim=False))  # synthesized
    return tuple(result)


def first_user_text(items: Sequence[Item]) -> str | None:
    return next(
        (visible_text(i) for i in items if i.get("role") == "user" and visible_text(i)), None
    )


def seen(history: Sequence[HistoryEntry]) -> str:
    return "\n".join(visible_text(entry.item) for entry in history)


def products(history: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    return [entry for entry in history if is_compaction_product(entry.item)]


def check(inp: CompactionInput) -> CompactionResult:
    """Plan `inp` and assert every property; returns the result."""
    frozen = copy.deepcopy(inp)
    result = plan_compaction(inp, count_tokens=quarter_bytes)

    assert inp == frozen, "the input was mutated"
    assert plan_compaction(inp, count_tokens=quarter_bytes) == result, "not deterministic"
    assert find_pairing_violations([entry.item for entry in result.history]) == []
    assert result.tokens_after == sum(quarter_bytes(seen([e])) for e in result.history)
    if result.is_noop:
        assert result.history is inp.history
        return result
    assert tuple(entry.item for entry in result.history[: len(inp.invariants)]) == inp.invariants
    if inp.goal:
        assert inp.goal in seen(result.history)
    made = products(result.history)
    assert len(made) <= 1
    if result.strategy in ("summary", "handoff", "notes"):
        (product,) = made
        assert product is result.history[len(inp.invariants)]
        assert summary_of(product.item) == result.summary
        assert notes_of(product.item) == result.notes
        if inp.goal:
            # The goal is carried once: by the invariants when they pin it, else by the record.
            pinned = any(inp.goal in visible_text(item) for item in inp.invariants)
            if pinned:
                assert GOAL_PINNED_ABOVE in visible_text(product.item)
            else:
                assert inp.goal in visible_text(product.item)

    for strategy in ("summary", "handoff", "notes"):
        again = plan_compaction(
            CompactionInput(
                history=result.history,
                strategy=strategy,
                params=CompactionParams(keep_recent=1, target_tokens=result.tokens_after // 2),
                goal=inp.goal,
                invariants=inp.invariants,
            ),
            count_tokens=quarter_bytes,
        )
        assert find_pairing_violations([entry.item for entry in again.history]) == []
        if again.is_noop:
            continue
        (merged,) = products(again.history)
        assert merged is again.history[len(inp.invariants)]
        text = visible_text(merged.item)
        assert sum(text.count(marker) for marker in MARKERS) == 1, "a product nested in another"
        assert (summary_of(merged.item), notes_of(merged.item)) == (again.summary, again.notes)
        earlier = summary_of(made[0].item) if made else None
        if earlier is not None and again.summary is not None:
            assert again.summary.from_seq == earlier.from_seq
    return result


# --- random histories ---------------------------------------------------------------------

texts = st.one_of(
    # Hypothesis also draws the module's own string constants, markers included. A user text
    # holding a marker would be quoted into the product and fool the marker count below; that
    # case has its own test (`test_a_user_text_that_quotes_a_marker_is_never_read_as_a_product`).
    st.text(max_size=30).filter(lambda text: not any(marker in text for marker in MARKERS)),
    st.sampled_from(
        [
            "ok",
            "see src/app.py and ./docs/guide.md",
            'Traceback (most recent call last):\n  File "src/app.py", line 3\nValueError: bad',
            "error: cannot open config.yaml",
            "FAILED tests/test_app.py::test_run",
            "3 passed in 0.1s",
            "I'll use a queue instead. Next I will test it.",
            " ".join(["filler"] * 60),
        ]
    ),
)
batch = st.lists(
    st.tuples(st.sampled_from(["bash", "read", "edit"]), texts, st.one_of(st.none(), texts)),
    min_size=1,
    max_size=3,
)
events = st.lists(
    st.one_of(
        st.tuples(st.just("user"), texts),
        st.tuples(st.just("assistant"), texts),
        st.tuples(st.just("reasoning"), texts),
        st.tuples(st.just("batch"), batch),
    ),
    max_size=25,
)


def build(script: Sequence[tuple[str, Any]]) -> list[Item]:
    items: list[Item] = []
    for number, (kind, payload) in enumerate(script):
        match kind:
            case "user":
                items.append(user_msg(payload))
            case "assistant":
                items.append(assistant_msg(payload))
            case "reasoning":
                items.append(
                    {"type": "reasoning", "summary": [{"type": "summary_text", "text": payload}]}
                )
            case _:
                calls = [
                    (f"c{number}_{i}", name, text, out)
                    for i, (name, text, out) in enumerate(payload)
                ]
                items += [
                    tool_call(cid, name, json.dumps({"command": text}))
                    for cid, name, text, _ in calls
                ]
                # A missing output is synthesized by normalization (seq None).
                items += [tool_output(cid, out) for cid, _, _, out in calls if out is not None]
    return items


@settings(max_examples=100, deadline=None)
@given(
    script=events,
    strategy=st.sampled_from(STRATEGIES),
    keep_recent=st.integers(0, 4),
    target_share=st.one_of(st.none(), st.floats(0.05, 1.2)),
    clear_at_least=st.sampled_from([0, 0, 20]),
    exclude=st.sampled_from([(), ("read",)]),
    clear_inputs=st.booleans(),
    anchored=st.booleans(),
)
def test_every_strategy_keeps_its_invariants_on_random_histories(
    script: list[tuple[str, Any]],
    strategy: Strategy,
    keep_recent: int,
    target_share: float | None,
    clear_at_least: int,
    exclude: tuple[str, ...],
    clear_inputs: bool,
    anchored: bool,
) -> None:
    items = build(script)
    history = entries_of(items)
    goal = first_user_text(items) or DEFAULT_GOAL
    # Without invariants the goal must come from the history itself.
    invariants = (developer_msg(f"Goal: {goal}"),) if anchored or goal == DEFAULT_GOAL else ()
    size = sum(quarter_bytes(visible_text(entry.item)) for entry in history)
    check(
        CompactionInput(
            history=history,
            strategy=strategy,
            params=CompactionParams(
                keep_recent=keep_recent,
                clear_at_least_tokens=clear_at_least,
                exclude_tools=exclude,
                clear_tool_inputs=clear_inputs,
                target_tokens=None if target_share is None else int(size * target_share),
            ),
            goal=goal,
            invariants=invariants,
            pinned_notes=("keep the API stable",) if anchored else (),
        )
    )


# --- real trajectories --------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_every_strategy_keeps_its_invariants_on_every_trajectory(
    path: Path, strategy: Strategy
) -> None:
    items = load_trajectory(path)
    history = entries_of(items)
    goal = first_user_text(items)
    assert goal is not None
    size = sum(quarter_bytes(visible_text(entry.item)) for entry in history)
    check(
        CompactionInput(
            history=history,
            strategy=strategy,
            params=CompactionParams(target_tokens=size // 4),
            goal=goal,
            invariants=(developer_msg(f"Goal: {goal}"),),
        )
    )


@pytest.mark.parametrize("strategy", PRODUCT_STRATEGIES)
@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_every_record_keeps_its_paths_and_names_the_commands_it_leaves_out_on_every_trajectory(
    path: Path, strategy: Strategy
) -> None:
    items = load_trajectory(path)
    history = entries_of(items)
    goal = first_user_text(items)
    size = sum(quarter_bytes(visible_text(entry.item)) for entry in history)
    result = plan_compaction(
        CompactionInput(
            history=history,
            strategy=strategy,
            params=CompactionParams(target_tokens=size // 4),
            goal=goal,
            invariants=(developer_msg(f"Goal: {goal}"),),
        ),
        count_tokens=quarter_bytes,
    )

    assert result.covered is not None
    first, last = result.covered
    covered = [entry for entry in history if entry.seq is not None and first <= entry.seq <= last]
    lost = find_lost_identifiers(covered=covered, new_history=result.history)
    record = next(p for e in result.history if (p := read_product(e.item)) is not None)
    # Every path stays visible. A record over its budget leaves out its oldest commands and
    # says so (they are in its range, one recall away); an outcome line shows one error of its
    # step, so a step's other error lines may go.
    assert [i for i in lost if i.kind == "path"] == []
    if any(i.kind == "command" for i in lost):
        assert {"commands", "note_commands"} & set(record.omitted)
