"""Properties of world-state diffs over random nested snapshots and over every real trajectory.

The merge patch of a diff, applied with `json_merge_patch`, rebuilds the new snapshot exactly as
JSON; it names only what changed, nulls what was removed and carries changed arrays whole. No input
is mutated, rendering is deterministic, and once the updates of a diff are in the history the model
sees exactly the new snapshot's sections, so the next diff of the same snapshot sends nothing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import json_merge_patch  # type: ignore[import-untyped]
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.domain.items import Item
from app.domain.world_state import (
    KNOWN_SECTIONS,
    SectionChange,
    WorldStateUpdate,
    apply_patch,
    diff_world_state,
    goal_text_of,
    render_section,
    sections_in_history,
    validate_sections,
)

TRAJECTORIES = sorted((Path(__file__).parents[1] / "data" / "trajectories").glob("*.jsonl"))

# Values Python's `==` calls equal although their JSON differs: swapping one for another is a
# change that a patch built on `==` would silently lose. TWINNED is such a swap, always checked.
LOOK_ALIKES = (0, 0.0, -0.0, False, 1, 1.0, True)
TWINNED = ({"tools": {"a": 1, "b": [0, -0.0]}}, {"tools": {"a": True, "b": [0.0, 0.0]}})
# Few keys and few leaf values, so that two random snapshots often share sections, keys and
# values, and the patch has nested changes, removals and unchanged parts to get right.
keys = st.sampled_from(["a", "b", "c", "é"])
leaves = st.one_of(
    st.sampled_from([None, *LOOK_ALIKES, 0.5, -2, "", "x", "</world_state>"]),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
section_ids = st.sampled_from([*KNOWN_SECTIONS, "ci:status", "notes.v2"])
snapshots = st.dictionaries(
    section_ids, json_values.filter(lambda value: value is not None), max_size=5
)


@st.composite
def edited(draw: st.DrawFn, value: Any, *, twins_only: bool = False) -> Any:
    """`value` with leaves swapped for look-alikes and, unless `twins_only`, other edits:
    object keys dropped, added or edited, arrays redrawn, leaves redrawn."""
    if isinstance(value, dict):
        if twins_only:
            return {key: draw(edited(inner, twins_only=True)) for key, inner in value.items()}
        result = {}
        for key, inner in value.items():
            action = draw(st.sampled_from(["keep", "drop", "edit"]))
            if action != "drop":
                result[key] = inner if action == "keep" else draw(edited(inner))
        return result | draw(st.dictionaries(keys, json_values, max_size=1))
    if isinstance(value, list):
        if twins_only or draw(st.booleans()):
            return [draw(edited(inner, twins_only=twins_only)) for inner in value]
        return draw(st.lists(json_values, max_size=3))
    twins = [twin for twin in LOOK_ALIKES if twin == value and type(value) in (bool, int, float)]
    if twins and (twins_only or draw(st.booleans())):
        return draw(st.sampled_from(twins))
    return value if twins_only else draw(leaves)


@st.composite
def snapshot_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A snapshot and a later one: unrelated, or an edit of it (shared sections, nested edits)."""
    previous = draw(snapshots)
    if draw(st.integers(0, 3)) == 0:
        return previous, draw(snapshots)
    new: dict[str, Any] = {}
    for section, value in previous.items():
        action = draw(st.sampled_from(["keep", "drop", "edit", "twin"]))
        if action == "keep":
            new[section] = value
        elif action == "twin":
            new[section] = draw(edited(value, twins_only=True))
        elif action == "edit" and (changed := draw(edited(value))) is not None:
            new[section] = changed
    additions = draw(snapshots)
    return previous, new | {
        section: value for section, value in additions.items() if section not in previous
    }


def as_json(value: Any) -> str:
    """Exact JSON text: tells 1, 1.0 and true apart, which Python's `==` does not."""
    return json.dumps(value, sort_keys=True)


def visible_history(snapshot: dict[str, Any]) -> list[Item]:
    return list(
        diff_world_state(None, snapshot, baseline=None, active_history=[], version=1).updates
    )


@settings(max_examples=150, deadline=None)
@given(snapshot_pairs())
@example(TWINNED)
def test_patch_rebuilds_the_new_snapshot_through_json_merge_patch(
    pair: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    previous, new = pair
    before, after = validate_sections(previous), validate_sections(new)

    patch = diff_world_state(before, after, baseline=before, active_history=[], version=2).patch

    assert patch is not None
    assert as_json(apply_patch(before, patch)) == as_json(after)
    assert as_json(json_merge_patch.merge(copy.deepcopy(before), copy.deepcopy(patch))) == as_json(
        after
    )
    for section, value in patch.items():
        assert as_json(before.get(section)) != as_json(after.get(section))
        if section not in after:
            assert value is None
        elif not isinstance(before.get(section), dict) or not isinstance(after[section], dict):
            assert as_json(value) == as_json(after[section])
    assert set(patch) == {
        section
        for section in before.keys() | after.keys()
        if as_json(before.get(section)) != as_json(after.get(section))
    }


@settings(max_examples=150, deadline=None)
@given(snapshots, st.dictionaries(section_ids, json_values, max_size=5))
def test_apply_patch_agrees_with_json_merge_patch_and_mutates_nothing(
    snapshot: dict[str, Any], patch: dict[str, Any]
) -> None:
    snapshot_before, patch_before = copy.deepcopy(snapshot), copy.deepcopy(patch)

    result = apply_patch(snapshot, patch)

    assert snapshot == snapshot_before
    assert patch == patch_before
    expected = json_merge_patch.merge(copy.deepcopy(snapshot), copy.deepcopy(patch))
    assert as_json(result) == as_json(expected)


@settings(max_examples=150, deadline=None)
@given(snapshot_pairs(), st.one_of(st.none(), snapshots), st.booleans())
@example(TWINNED, None, True)
def test_diff_shows_the_model_exactly_the_new_snapshot_and_then_sends_nothing(
    pair: tuple[dict[str, Any], dict[str, Any]], other: dict[str, Any] | None, has_baseline: bool
) -> None:
    previous, new = pair
    sent = previous if other is None else other  # usually the model saw the previous snapshot
    history = visible_history(sent)
    baseline = validate_sections(sent) if has_baseline else None
    inputs_before = copy.deepcopy((previous, new, baseline, history))

    update = diff_world_state(previous, new, baseline=baseline, active_history=history, version=2)

    assert copy.deepcopy((previous, new, baseline, history)) == inputs_before
    assert update == diff_world_state(
        copy.deepcopy(previous),
        copy.deepcopy(new),
        baseline=baseline,
        active_history=history,
        version=2,
    )
    assert [change.section for change in update.changes] == sorted(
        change.section for change in update.changes
    )
    assert len(update.updates) == len(update.changes)
    snapshot = validate_sections(new)
    untouched = snapshot.keys() - {change.section for change in update.changes}
    for section in untouched:  # the model already sees exactly this value
        assert baseline is not None
        assert section in sections_in_history(history)
        assert as_json(baseline[section]) == as_json(snapshot[section])
    seen = [*history, *update.updates]
    assert sections_in_history(seen) == frozenset(snapshot)
    assert diff_world_state(
        snapshot, snapshot, baseline=snapshot, active_history=seen, version=3
    ) == WorldStateUpdate(updates=(), changes=(), patch={})


@settings(max_examples=150, deadline=None)
@given(snapshots, st.text(max_size=20))
def test_sections_lost_from_history_are_resent_in_full(
    snapshot: dict[str, Any], filler: str
) -> None:
    canonical = validate_sections(snapshot)

    update = diff_world_state(
        canonical,
        canonical,
        baseline=canonical,
        active_history=[{"type": "message", "role": "user", "content": filler}],
        version=2,
    )

    assert update == WorldStateUpdate(
        updates=tuple(
            render_section(section, value, version=2) for section, value in canonical.items()
        ),
        changes=tuple(SectionChange(section, "resent") for section in canonical),
        patch={},
    )


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_real_trajectories_hold_no_world_state_or_goal_fragment(path: Path) -> None:
    history = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    assert sections_in_history(history) == frozenset()
    assert [item for item in history if goal_text_of(item) is not None] == []
