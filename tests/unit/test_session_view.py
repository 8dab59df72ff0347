"""The session view, advanced fact by fact, equals one built from scratch: at every seq of every
trajectory and of random logs with forks, retractions, resets, compactions, world-state
fragments and malformed items, its normalized history, report, seqs and token counts are those
of normalizing the whole active history at once; and the fold's shared columns never show one
fold another's facts."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.advice import history_figures
from app.domain.advice_figures import FiguresDigest, digest_of, figures_of
from app.domain.facts import EMPTY_FOLD, ActiveHistory, Fold, fold_facts, fork_fold
from app.domain.facts.kinds import (
    COMPACTION_FACT,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
)
from app.domain.items import Item, visible_text
from app.domain.normalize import NormalizeResult, normalize_history
from app.domain.session_view import ActiveColumns, HistoryView, ViewSettings, view_of
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import render_goal
from tests.unit.test_normalize_properties import (
    damaged_histories,
    items,
    modalities,
    policies,
    quarter_bytes,
)

TRAJECTORIES = sorted((Path(__file__).parents[1] / "data" / "trajectories").glob("*.jsonl"))


SMALL_OUTPUTS = TruncationPolicy(limit=40)


def _settings(
    policy: TruncationPolicy = SMALL_OUTPUTS,
    input_modalities: frozenset[str] = frozenset({"text"}),
) -> ViewSettings:
    return ViewSettings(
        count=quarter_bytes,
        input_modalities=input_modalities,
        truncation=policy,
        stored_counts=True,
    )


def _columns(history: Sequence[Any], *, epoch: int = 0) -> ActiveColumns:
    return ActiveColumns(
        epoch=epoch,
        items=history,
        metadata=[{"harness_authored": n % 3 == 0} for n in range(len(history))],
        seqs=[10 + n for n in range(len(history))],
        stored_tokens=[None if n % 4 == 0 else 7 for n in range(len(history))],
    )


def _expected(active: ActiveColumns, settings: ViewSettings) -> NormalizeResult:
    return normalize_history(
        active.items,
        count_tokens=settings.count,
        input_modalities=settings.input_modalities,
        truncation=settings.truncation,
        item_metadata=active.metadata,
        seqs=active.seqs,
    )


def assert_view_is_the_whole_normalization(
    view: HistoryView, active: ActiveColumns, settings: ViewSettings
) -> None:
    expected = _expected(active, settings)
    assert view.result() == expected
    sources = list(view.sources)
    assert list(view.seqs) == [None if s is None else active.seqs[s] for s in sources]
    assert list(view.tokens) == [
        stored
        if source is not None
        and item is active.items[source]
        and (stored := active.stored_tokens[source]) is not None
        else quarter_bytes(visible_text(item))
        for item, source in zip(expected.items, sources, strict=True)
    ]


def _advance_through(history: Sequence[Any], steps: Sequence[int], settings: ViewSettings) -> None:
    """Advances one view through the prefixes ending at each of `steps`, checking each."""
    view: HistoryView | None = None
    for end in steps:
        active = _columns(history[:end])
        view = view_of(view, active, settings=settings)
        assert_view_is_the_whole_normalization(view, active, settings)


@settings(max_examples=250, deadline=None)
@given(
    st.one_of(st.lists(items, min_size=1, max_size=40), damaged_histories()),
    policies,
    modalities,
    st.randoms(use_true_random=False),
)
def test_a_view_advanced_in_any_steps_is_the_whole_history_normalized(
    history: list[Any], policy: TruncationPolicy, input_modalities: frozenset[str], rng: Any
) -> None:
    settings = _settings(policy, input_modalities)
    _advance_through(history, range(len(history) + 1), settings)
    jumps = sorted(rng.sample(range(len(history) + 1), k=min(4, len(history) + 1)))
    _advance_through(history, [*jumps, len(history)], settings)


def test_every_trajectory_at_every_seq() -> None:
    settings = _settings()
    for path in TRAJECTORIES:
        history = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        _advance_through(history, range(len(history) + 1), settings)


def test_the_tail_stays_short_once_calls_are_answered() -> None:
    history: list[Item] = [{"type": "message", "role": "user", "content": "go"}]
    for n in range(200):
        history.append({"type": "function_call", "call_id": f"c{n}", "name": "sh", "arguments": ""})
        history.append({"type": "function_call_output", "call_id": f"c{n}", "output": "ok"})
    history.append({"type": "function_call", "call_id": "open", "name": "sh", "arguments": ""})
    view = None
    for end in range(len(history) + 1):
        view = view_of(view, _columns(history[:end]), settings=_settings())
    assert view is not None
    assert view.boundary == len(history) - 1  # only the unanswered call is still open
    assert len(view.tail.part.items) == 2  # the call and the output synthesized for it


def test_advancing_an_older_view_never_changes_what_a_newer_one_reads() -> None:
    settings = _settings()
    history: list[Item] = []
    for n in range(30):
        history.append({"type": "function_call", "call_id": f"c{n}", "name": "sh", "arguments": ""})
        history.append({"type": "function_call_output", "call_id": f"c{n}", "output": f"out {n}"})
    base = view_of(None, _columns(history[:20]), settings=settings)
    newer = view_of(base, _columns(history[:40]), settings=settings)
    # The same base advanced again, along another history: it copies what it read.
    other = [*history[:20], {"type": "message", "role": "user", "content": "elsewhere"}]
    forked = view_of(base, _columns(other), settings=settings)
    assert forked.settled is not newer.settled
    for view, active in (
        (base, _columns(history[:20])),
        (newer, _columns(history[:40])),
        (forked, _columns(other)),
    ):
        assert_view_is_the_whole_normalization(view, active, settings)


def test_a_view_of_another_epoch_starts_again() -> None:
    settings = _settings()
    history: list[Item] = [
        {"type": "message", "role": "user", "content": f"m{n}"} for n in range(5)
    ]
    view = view_of(None, _columns(history), settings=settings)
    replaced = _columns(history[2:], epoch=1)
    again = view_of(view, replaced, settings=settings)
    assert again.epoch == 1
    assert_view_is_the_whole_normalization(again, replaced, settings)


# The fold: facts of every kind, folded one at a time and from scratch.


@dataclass(frozen=True)
class Fact:
    seq: int
    type: str
    item: dict[str, Any]
    provenance: dict[str, Any]
    phase: str | None
    tokens: int


def _random_log(rng: random.Random, length: int) -> list[Fact]:
    log: list[Fact] = []
    visible: list[int] = []
    world = 0
    for seq in range(1, length + 1):
        item: dict[str, Any]
        roll = rng.random()
        if roll < 0.05 and visible:
            kept = sorted(rng.sample(visible, k=rng.randint(0, len(visible))))
            history: list[dict[str, Any]] = [{"seq": s} for s in kept]
            history.insert(0, {"item": {"type": "message", "role": "user", "content": "summary"}})
            item = {"compaction_id": f"cmp-{seq}", "strategy": "summary", "history": history}
            log.append(Fact(seq, COMPACTION_FACT, item, {}, None, 0))
            visible = kept
        elif roll < 0.08 and visible:
            hidden = rng.sample(visible, k=rng.randint(1, len(visible)))
            log.append(Fact(seq, RETRACTION_FACT, {"seqs": hidden}, {}, None, 0))
            visible = [s for s in visible if s not in hidden]
        elif roll < 0.10:
            log.append(Fact(seq, RESET_FACT, {}, {}, None, 0))
            visible = []
        elif roll < 0.13:
            world += 1
            item = (
                {"version": world, "snapshot": {"rules": f"r{seq}"}}
                if world == 1
                else {"version": world, "patch": {"plan": f"p{seq}"}}
            )
            log.append(Fact(seq, WORLD_STATE_FACT, item, {}, None, 0))
        elif roll < 0.15:
            log.append(Fact(seq, GOAL_FACT, {"version": seq, "text": f"goal {seq}"}, {}, None, 0))
        else:
            item = rng.choice(
                [
                    {"type": "message", "role": "user", "content": f"ask {seq}"},
                    {
                        "type": "function_call",
                        "call_id": f"c{seq // 3}",
                        "name": "sh",
                        "arguments": "",
                    },
                    {
                        "type": "function_call_output",
                        "call_id": f"c{seq // 3}",
                        "output": "x" * seq,
                    },
                    {"type": "function_call_output", "call_id": f"c{seq}", "output": "orphan"},
                    {"type": "message", "role": "system", "content": "system"},
                    {"type": "mystery"},
                    render_goal(f"goal {seq}", version=seq),
                ]
            )
            log.append(Fact(seq, str(item["type"]), item, {"n": seq}, "explore", seq % 5))
            visible.append(seq)
    return log


def _active(fold: Fold) -> ActiveHistory:
    return ActiveHistory.of(
        fold, session_pk=1, encoding="o200k_base", context_window=8000, unit=None
    )


def _same_active(incremental: ActiveHistory, scratch: ActiveHistory) -> None:
    for field in ("items", "seqs", "metadata", "phases", "stored_tokens"):
        assert list(getattr(incremental, field)) == list(getattr(scratch, field)), field
    assert dict(incremental.logged) == dict(scratch.logged)
    for field in (
        "last_seq",
        "goal",
        "world_state",
        "compactions",
        "compaction_id",
        "grown_since_compaction",
        "retracted",
        "reset_at",
        "compacted_by",
        "epoch",
    ):
        assert getattr(incremental, field) == getattr(scratch, field), field


def _view(active: ActiveHistory) -> HistoryView:
    previous = active.views.get("view")
    view = view_of(
        previous,
        ActiveColumns(
            epoch=active.epoch,
            items=active.items,
            metadata=active.metadata,
            seqs=active.seqs,
            stored_tokens=active.stored_tokens,
        ),
        settings=_settings(),
    )
    active.views["view"] = view
    return view


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=60))
def test_a_log_folded_fact_by_fact_is_the_log_folded_at_once(rng: Any, length: int) -> None:
    log = _random_log(rng, length)
    fold = EMPTY_FOLD
    older: list[tuple[Fold, ActiveHistory]] = []
    for n, fact in enumerate(log, start=1):
        fold = fold_facts(fold, [fact], last_seq=fact.seq)
        incremental = _active(fold)
        scratch = _active(fold_facts(EMPTY_FOLD, log[:n], last_seq=fact.seq))
        _same_active(incremental, scratch)
        view = _view(incremental)
        assert view.result() == _expected(
            ActiveColumns(
                epoch=0,
                items=list(scratch.items),
                metadata=list(scratch.metadata),
                seqs=list(scratch.seqs),
                stored_tokens=list(scratch.stored_tokens),
            ),
            _settings(),
        )
        older.append((fold, scratch))
    # No fold reads what a later one appended to the columns they share, and an older fold
    # advanced along another log reads its own facts, not those a later fold appended.
    for old, scratch in older:
        _same_active(_active(old), scratch)
    middle = len(log) // 2
    other = Fact(
        log[middle].seq,
        "message",
        {"type": "message", "role": "user", "content": "other"},
        {},
        None,
        1,
    )
    start = older[middle - 1][0] if middle else EMPTY_FOLD
    branched = fold_facts(start, [other], last_seq=other.seq)
    _same_active(
        _active(branched),
        _active(fold_facts(EMPTY_FOLD, [*log[:middle], other], last_seq=other.seq)),
    )
    _same_active(_active(fold), _active(fold_facts(EMPTY_FOLD, log, last_seq=log[-1].seq)))
    # A fork starts from its parent as of the fork point, and folds its own facts after it.
    parent = _active(fold)
    child = fold_facts(
        fork_fold(parent, inherit={"rules": True}),
        [Fact(1, "message", {"type": "message", "role": "user", "content": "fork"}, {}, None, 2)],
        last_seq=1,
    )
    assert list(_active(child).items)[-1]["content"] == "fork"
    _same_active(_active(old), scratch)


# Advice's figures, kept with the view.

questions = st.sampled_from(
    [
        {"type": "message", "role": "user", "content": "Why does the build fail?"},
        {"type": "message", "role": "user", "content": "why does the BUILD fail"},
        {"type": "message", "role": "user", "content": "Run the tests."},
        {"type": "message", "role": "user", "content": "!!!"},
        render_goal("Ship it.", version=1),
        {"type": "function_call_output", "call_id": "a", "output": "[cleared: 120 tokens]"},
    ]
)


def _figures_along(history: Sequence[Any], steps: Sequence[int]) -> None:
    view: HistoryView | None = None
    digest: FiguresDigest | None = None
    for end in steps:
        view = view_of(view, _columns(history[:end]), settings=_settings())
        digest = digest_of(digest, view)
        assert figures_of(digest, view) == history_figures(view.items, view.tokens)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(items, questions, questions), min_size=1, max_size=40),
    st.randoms(use_true_random=False),
)
def test_advice_figures_kept_with_the_view_are_those_of_the_whole_history(
    history: list[Any], rng: Any
) -> None:
    _figures_along(history, range(len(history) + 1))
    jumps = sorted(rng.sample(range(len(history) + 1), k=min(3, len(history) + 1)))
    _figures_along(history, [*jumps, len(history)])


def test_advice_figures_of_every_trajectory_at_every_seq() -> None:
    for path in TRAJECTORIES:
        history = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        _figures_along(history, range(len(history) + 1))
