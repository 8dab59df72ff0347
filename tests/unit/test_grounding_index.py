"""The live grader reads the session's occurrence index, not the history's text: at every model
call of every public run, with compactions, retractions, resets, goals and world-state facts in
the log and elided ranges over it, it grades exactly as `grade_action` over the text does."""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from app.domain.column_codec import decoded, encoded
from app.domain.facts import (
    COMPACTION_FACT,
    EMPTY_FOLD,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
    ActiveHistory,
    fold_facts,
)
from app.domain.grounding import (
    MAX_GRADED_IDENTIFIERS,
    extract_identifiers,
    grade_action,
    items_text,
)
from app.domain.grounding_index import (
    ElidedRange,
    OccurrenceIndex,
    grade_indexed,
    occurrence_index,
)
from app.domain.items import is_model_output, item_type
from tests.builders import Fact
from tests.conftest import TRAJECTORIES, load_trajectory

FORMS = ("dropped", "cleared", "truncated", "summarized", "excluded")


def _log(items: list[dict[str, Any]], rng: random.Random) -> list[Fact]:
    """The run's items as facts, with the service's own facts between them now and then. A
    compaction's summary and a world-state fact plant a name nothing else holds, which a later
    model output names: it is in the history only through them."""
    log = [Fact(1, GOAL_FACT, {"version": 1, "text": "Make the tests pass"}, {}, None, 0)]
    visible: list[int] = []
    planted: list[str] = []
    for item in items:
        seq = len(log) + 1
        roll = rng.random()
        if roll < 0.02 and visible:
            kept = sorted(rng.sample(visible, k=rng.randint(0, len(visible))))
            planted.append(f"summarized_name_{seq}")
            summary = f"Summary: worked on {planted[-1]}"
            history: list[dict[str, Any]] = [{"seq": s} for s in kept]
            history.insert(0, {"item": {"type": "message", "role": "user", "content": summary}})
            fact = {"compaction_id": f"cmp-{seq}", "strategy": "summary", "history": history}
            log.append(Fact(seq, COMPACTION_FACT, fact, {}, None, 0))
            visible = kept
        elif roll < 0.03 and visible:
            hidden = rng.sample(visible, k=rng.randint(1, min(3, len(visible))))
            log.append(Fact(seq, RETRACTION_FACT, {"seqs": hidden}, {}, None, 0))
            visible = [s for s in visible if s not in hidden]
        elif roll < 0.035:
            log.append(Fact(seq, RESET_FACT, {}, {}, None, 0))
            visible = []
        elif roll < 0.045:
            planted.append(f"world_name_{seq}")
            snapshot = {"files": f"edited tests/test_{seq}.py via {planted[-1]}"}
            world = {"version": seq, "snapshot": snapshot}
            log.append(Fact(seq, WORLD_STATE_FACT, world, {}, None, 0))
        elif roll < 0.05:
            goal = {"version": seq, "text": "Fix the failing test in src/app.py"}
            log.append(Fact(seq, GOAL_FACT, goal, {}, None, 0))
        seq = len(log) + 1
        log.append(Fact(seq, item_type(item) or "message", item, {}, None, 0))
        visible.append(seq)
        if is_model_output(item) and planted and rng.random() < 0.3:
            named = {"type": "message", "role": "assistant", "content": rng.choice(planted)}
            log.append(Fact(seq + 1, "message", named, {}, None, 0))
            visible.append(seq + 1)
    return log


def _elided(rng: random.Random, as_of: int) -> list[ElidedRange]:
    """Ranges over [1, as_of], in seq order and apart, as a context lists them."""
    cuts = sorted(rng.sample(range(1, as_of + 1), k=min(as_of, rng.randint(0, 12))))
    ranges = []
    for first, last in zip(cuts[::2], cuts[1::2], strict=False):
        ranges.append(ElidedRange(first, last, rng.choice(FORMS)))
    return ranges


def _in_active(active: ActiveHistory, as_of: int, seq: int) -> bool:
    return seq <= as_of and active.position_of(seq) is not None


def _restored_in_place(active: ActiveHistory, index: OccurrenceIndex) -> OccurrenceIndex:
    """`index` written as a checkpoint holds it and restored, kept with the log in its place (so
    that the next call advances the restored one, as a worker new to the session does)."""
    copy = OccurrenceIndex.restored(decoded(encoded(index.record())))
    derived = active.logged.derived
    derived[next(key for key, kept in derived.items() if kept is index)] = copy
    return copy


@pytest.mark.parametrize("restoring", [False, True], ids=["kept", "restored"])
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[path.stem for path in TRAJECTORIES])
def test_the_indexed_grade_is_the_grade_over_the_text(path: Any, restoring: bool) -> None:
    """With `restoring`, the index is restored from its checkpoint's record before each grade
    (own facts, runs added to and runs new since all read through the restored columns)."""
    rng = random.Random(path.stem)
    log = _log(load_trajectory(path), rng)
    by_seq = {fact.seq: fact for fact in log}
    fold, folded, calls = EMPTY_FOLD, 0, 0
    for at, fact in enumerate(log):
        if not is_model_output(fact.item) or at == 0 or is_model_output(log[at - 1].item):
            continue
        end = at
        while end < len(log) and is_model_output(log[end].item):
            end += 1
        action = [fact.item for fact in log[at:end]]
        fold = fold_facts(fold, log[folded:end], last_seq=end)
        folded = end
        active = ActiveHistory.of(
            fold, session_pk=1, encoding="o200k_base", context_window=8_000, unit=None
        )
        as_of = fact.seq - 1
        elided = _elided(rng, as_of)
        shown_items = [
            item
            for seq, item in zip(active.seqs, active.items, strict=True)
            if seq is None or (seq <= as_of and not any(e.first <= seq <= e.last for e in elided))
        ]
        shown = items_text(shown_items[rng.randint(0, len(shown_items)) :])
        goal = active.goal.text if active.goal is not None else ""
        in_range = [[by_seq[s] for s in range(e.first, e.last + 1)] for e in elided]
        expected = grade_action(
            action,
            history=[
                item
                for seq, item in zip(active.seqs, active.items, strict=True)
                if seq is None or seq <= as_of
            ]
            + [f.item for facts in in_range for f in facts],
            shown=shown,
            elided=[
                (e.form, items_text([f.item for f in facts]))
                for e, facts in zip(elided, in_range, strict=True)
            ],
            goal=goal,
        )
        index = occurrence_index(active.logged)
        if restoring:
            index = _restored_in_place(active, index)
        # The grader reads the own facts inside the ranges the first time it meets them.
        own = [seq for e in elided for seq in active.logged.internal(e.first, e.last)]
        index.add_own_facts([(seq, by_seq[seq].item) for seq in index.own_facts_missing(own)])
        graded = grade_indexed(
            action,
            index=index,
            in_active=functools.partial(_in_active, active, as_of),
            written=[active.items[position] for position in active.written],
            elided=elided,
            shown=shown,
            goal=goal,
        )
        assert graded == expected, (path.stem, fact.seq)
        calls += 1
    assert calls > 0


def test_an_action_naming_more_than_the_cap_is_graded_on_the_first_and_says_how_many_not() -> None:
    names = [f"module_{n:06d}.helper_{n:06d}" for n in range(MAX_GRADED_IDENTIFIERS + 500)]
    facts = [
        Fact(
            1,
            "message",
            {"type": "message", "role": "user", "content": " ".join(names)},
            {},
            None,
            0,
        )
    ]
    fold = fold_facts(EMPTY_FOLD, facts, last_seq=1)
    active = ActiveHistory.of(
        fold, session_pk=1, encoding="o200k_base", context_window=8_000, unit=None
    )
    action = [{"type": "message", "role": "assistant", "content": " ".join(names)}]
    graded = grade_indexed(
        action,
        index=occurrence_index(active.logged),
        in_active=lambda seq: seq <= 1,
        written=[],
        elided=[],
        shown="",
        goal="",
    )
    named = len(extract_identifiers(" ".join(names)))
    assert named > len(names) > MAX_GRADED_IDENTIFIERS
    assert (graded.needed, graded.visible, graded.ungraded) == (
        MAX_GRADED_IDENTIFIERS,
        0,
        named - MAX_GRADED_IDENTIFIERS,
    )
