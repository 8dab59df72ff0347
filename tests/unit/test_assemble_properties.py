"""Properties of assembly over random inputs and over every real trajectory.

Every candidate and history entry is planned exactly once, in input order; totals and per-group
quotas are exceeded only by required candidates, and `over_budget` says exactly when; the same
input always gives the same plan; selected history is a suffix that keeps every call with its
output. Large inputs complete (their speed is measured in `bench.assemble_core`, never here).
"""

from __future__ import annotations

import copy
import functools
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.assemble import (
    LAYERS,
    AssemblyInput,
    Candidate,
    Contribution,
    assemble,
    decide,
)
from app.domain.assemble.model import BUDGET_REASONS
from app.domain.budget import Budget
from app.domain.history import HistoryEntry, cuts_from_end, history_cuts
from app.domain.items import Item, visible_text
from app.domain.normalize import find_pairing_violations, normalize_history
from app.domain.shingles import words_of
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


def words(text: str) -> int:
    return len(text.split())


# Few words, ids, sources and locators, so that duplicates, near-duplicates and quotas collide.
texts = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]), max_size=12
).map(" ".join)
signals = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
rare = st.sampled_from([False, False, False, False, True])


@st.composite
def candidates(draw: st.DrawFn, source: str) -> Candidate:
    forms = draw(st.dictionaries(st.sampled_from(["skeleton", "reference"]), texts, max_size=2))
    return Candidate(
        id=draw(st.sampled_from(["a", "b", "c", "d", "e", "f"])),
        source=source,
        layer=draw(st.sampled_from(LAYERS)),
        source_class=draw(st.sampled_from([None, None, "docs", "notes"])),
        content=draw(texts),
        forms=forms,
        locator=draw(st.sampled_from([None, "file://a", "file://b", "memory://c", "https://d"])),
        required=draw(rare),
        priority=draw(signals),
        relevance=draw(signals),
        trust=draw(signals),
        freshness=draw(signals),
        tokens=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=20))),
        restate_at_end=draw(rare),
    )


@st.composite
def contributions(draw: st.DrawFn) -> tuple[Contribution, ...]:
    sources = draw(st.lists(st.sampled_from(["fs", "search", "memory", "web"]), max_size=6))
    return tuple(
        Contribution(source, tuple(draw(st.lists(candidates(source), max_size=6))))
        for source in sources
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[HistoryEntry, ...]:
    """Well-formed turns: a user message, optional reasoning, a batch of calls, a reply."""
    items: list[Item] = []
    for turn in range(draw(st.integers(min_value=0, max_value=5))):
        items.append(user_msg(draw(texts)))
        if draw(st.booleans()):
            items.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]})
        calls = [f"{turn}.{n}" for n in range(draw(st.integers(min_value=0, max_value=3)))]
        items.extend(tool_call(call_id, arguments=draw(texts)) for call_id in calls)
        items.extend(tool_output(call_id, draw(texts)) for call_id in calls)
        items.append(assistant_msg(draw(texts)))
    return tuple(HistoryEntry(None, item, id=f"seq:{n}") for n, item in enumerate(items))


limits = st.one_of(st.none(), st.integers(min_value=0, max_value=40))
inputs = st.builds(
    AssemblyInput,
    contributions=contributions(),
    history=histories(),
    budget=st.builds(
        Budget,
        max_items=st.one_of(st.none(), st.integers(min_value=0, max_value=8)),
        max_tokens=limits,
        max_items_per_source=st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
        max_tokens_per_source=limits,
    ),
    history_counts_toward_max_items=st.booleans(),
    placement=st.sampled_from(["edges", "input_order"]),
    min_relevance=st.sampled_from([0.0, 0.0, 0.5]),
    near_duplicate_threshold=st.sampled_from([0.5, 0.9, 1.0]),
    recall_cap=st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
    history_cut_step=st.one_of(st.none(), st.integers(min_value=1, max_value=30)),
    keep_newest=st.booleans(),
)


def flat(inp: AssemblyInput) -> list[Candidate]:
    return [c for contribution in inp.contributions for c in contribution.candidates]


@PROPERTY_SETTINGS
@given(inputs)
def test_every_candidate_and_history_entry_is_planned_once_in_input_order(
    inp: AssemblyInput,
) -> None:
    plan = assemble(inp, count_tokens=words)
    candidates = len(flat(inp))
    assert [(e["id"], e["source"], e["layer"]) for e in plan.plan[:candidates]] == [
        (c.id, c.source, c.layer) for c in flat(inp)
    ]
    # The history: dropped entries as runs of one reason each (a run of one named as its
    # entry), then every entry shown; together every entry once, in order, their tokens too.
    covered: list[str] = []
    for entry in plan.plan[candidates:]:
        assert (entry["source"], entry["layer"]) == ("history", "recent")
        first, _, last = entry["id"].removeprefix("history:").partition("-")
        if last:
            assert entry["decision"] == "dropped"
            covered += [h.id for h in inp.history[int(first) : int(last) + 1]]
        else:
            covered.append(entry["id"])
    assert covered == [h.id for h in inp.history]
    history_tokens = sum(words(visible_text(h.item)) for h in inp.history)
    dropped = [e for e in plan.plan[candidates:] if e["decision"] == "dropped"]
    shown = [item for item in plan.items if item.source == "history"]
    if not any(item.form == "truncated" for item in shown):
        assert sum(e["tokens"] for e in dropped) + sum(i.tokens for i in shown) == history_tokens
    assert [item.position for item in plan.items] == list(range(len(plan.items)))
    assert all((e["decision"] == "selected") == (e["reason"] is None) for e in plan.plan)
    selected = [e for e in plan.plan if e["decision"] == "selected"]
    assert all(
        e["position"] is not None and plan.items[e["position"]].id == e["id"] for e in selected
    )
    restated = [item for item in plan.items if item.id.endswith("#restated")]
    assert len(plan.items) == len(selected) + len(restated)
    assert plan.truncated == any(
        e["decision"] == "dropped" and e["reason"] in BUDGET_REASONS for e in plan.plan
    )
    assert plan.total_tokens == sum(item.tokens for item in plan.items)
    assert sum(plan.by_source_class.values()) == plan.total_tokens
    assert list(plan.by_source_class) == sorted(plan.by_source_class)


@PROPERTY_SETTINGS
@given(inputs)
def test_totals_exceed_the_budget_only_by_required_candidates(inp: AssemblyInput) -> None:
    plan = assemble(inp, count_tokens=words)
    budget = inp.budget
    required_tokens = required_items = 0
    group_tokens: Counter[str] = Counter()
    group_items: Counter[str] = Counter()
    required_group_tokens: Counter[str] = Counter()
    required_group_items: Counter[str] = Counter()
    for c, entry in zip(flat(inp), plan.plan, strict=False):
        if entry["decision"] != "selected":
            continue
        copies = 2 if c.restate_at_end and inp.placement == "edges" else 1
        if c.source_class:
            group = f"class:{c.source_class}"
        elif c.locator:
            group = f"scheme:{c.locator.split(':', 1)[0]}"
        else:
            group = f"layer:{c.layer}"
        group_tokens[group] += copies * entry["tokens"]
        group_items[group] += 1
        if c.required:
            required_tokens += copies * entry["tokens"]
            required_items += 1
            required_group_tokens[group] += copies * entry["tokens"]
            required_group_items[group] += 1
    candidate_items = sum(
        1 for e in plan.plan if e["decision"] == "selected" and e["score"] is not None
    )
    history_items = sum(1 for e in plan.plan if e["decision"] == "selected" and e["score"] is None)
    counted_items = candidate_items + (history_items if inp.history_counts_toward_max_items else 0)
    if budget.max_tokens is not None:
        assert plan.total_tokens <= max(budget.max_tokens, required_tokens)
    if budget.max_items is not None:
        assert counted_items <= max(budget.max_items, required_items)
    if budget.max_tokens_per_source is not None:
        limit = budget.max_tokens_per_source
        assert all(t <= max(limit, required_group_tokens[g]) for g, t in group_tokens.items())
    if budget.max_items_per_source is not None:
        limit = budget.max_items_per_source
        assert all(n <= max(limit, required_group_items[g]) for g, n in group_items.items())
    assert plan.over_budget == (
        (budget.max_tokens is not None and plan.total_tokens > budget.max_tokens)
        or (budget.max_items is not None and counted_items > budget.max_items)
    )


@PROPERTY_SETTINGS
@given(inputs)
def test_same_input_gives_the_same_plan_and_hash(inp: AssemblyInput) -> None:
    first = assemble(inp, count_tokens=words)
    again = assemble(copy.deepcopy(inp), count_tokens=words)
    assert again == first
    assert again.plan_hash == first.plan_hash


@PROPERTY_SETTINGS
@given(inputs)
def test_selected_history_is_a_paired_suffix_of_random_histories(inp: AssemblyInput) -> None:
    plan = assemble(inp, count_tokens=words)
    shown = [item.item for item in plan.items if item.source == "history" and item.item]
    assert shown == [h.item for h in inp.history[len(inp.history) - len(shown) :]]
    assert find_pairing_violations(shown) == []


@functools.cache
def normalized_trajectory(path: Path) -> tuple[HistoryEntry, ...]:
    result = normalize_history(load_trajectory(path), count_tokens=words)
    return tuple(HistoryEntry(None, item, id=f"seq:{n}") for n, item in enumerate(result.items))


@PROPERTY_SETTINGS
@given(
    st.sampled_from(TRAJECTORIES),
    st.floats(min_value=0.0, max_value=1.1),
    st.booleans(),
)
def test_selected_history_of_every_trajectory_keeps_calls_with_their_outputs(
    path: Path, fraction: float, with_goal: bool
) -> None:
    history = normalized_trajectory(path)
    full = sum(words(visible_text(entry.item)) for entry in history)
    goal = Candidate(id="goal", source="goal", layer="task", content="the goal", required=True)
    inp = AssemblyInput(
        contributions=(Contribution("goal", (goal,)),) if with_goal else (),
        history=history,
        budget=Budget(max_items=None, max_tokens=int(full * fraction)),
    )
    plan = assemble(inp, count_tokens=words)
    shown = [item.item for item in plan.items if item.source == "history"]
    assert shown == [h.item for h in history[len(history) - len(shown) :]]
    assert find_pairing_violations([item for item in shown if item is not None]) == []
    assert plan.total_tokens <= int(full * fraction) or plan.over_budget


def many_candidates(count: int, *, length: int, seed: int) -> tuple[Contribution, ...]:
    rng = random.Random(seed)
    vocabulary = [f"w{n}" for n in range(2000)]
    sources = ["fs", "search", "memory", "web", "notes"]
    return tuple(
        Contribution(
            source,
            tuple(
                Candidate(
                    id=f"{source}-{n}",
                    source=source,
                    layer="memory" if source in ("memory", "notes") else "retrieval",
                    content=" ".join(rng.choices(vocabulary, k=length)),
                    locator=f"file://{source}/{n}.py",
                    priority=rng.random(),
                    relevance=rng.random(),
                    tokens=length,
                )
                for n in range(count // len(sources))
            ),
        )
        for source in sources
    )


@pytest.mark.parametrize(
    "budget", [Budget(), Budget(None, None, None, None)], ids=["balanced", "unlimited"]
)
def test_ten_thousand_candidates_complete_with_a_full_plan(budget: Budget) -> None:
    inp = AssemblyInput(
        contributions=many_candidates(10_000, length=40, seed=1), budget=budget, recall_cap=None
    )
    plan = assemble(inp, count_tokens=words)
    assert len(plan.plan) == 10_000
    selected = sum(1 for entry in plan.plan if entry["decision"] == "selected")
    assert len(plan.items) == selected
    if budget.max_items is None:
        assert selected == 10_000 - sum(1 for e in plan.plan if e["reason"] == "near_duplicate")
    else:
        assert 0 < selected <= budget.max_items


@pytest.mark.parametrize("recall_cap", [20, None], ids=["recall-cap-20", "no-recall-cap"])
def test_assembly_of_500_candidates_gives_the_same_plan_every_run(recall_cap: int | None) -> None:
    # Each run gets an input built afresh, so that nothing can carry over by object identity.
    plans = [
        assemble(
            AssemblyInput(
                contributions=many_candidates(500, length=400, seed=2), recall_cap=recall_cap
            ),
            count_tokens=words,
        )
        for _ in range(3)
    ]
    assert len(plans[0].plan) == 500
    assert all(plan == plans[0] for plan in plans)


_WORD_RUNS = re.compile(r"\w+")


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
@PROPERTY_SETTINGS
def test_the_words_near_duplicates_compare_are_the_runs_of_word_characters(text: str) -> None:
    # ASCII text takes a faster way than the pattern: it must find the very same words.
    assert words_of(text) == _WORD_RUNS.findall(text.lower())
    ascii_text = text.encode("ascii", errors="ignore").decode()
    assert words_of(ascii_text) == _WORD_RUNS.findall(ascii_text.lower())


def test_every_real_text_splits_into_the_same_words_either_way() -> None:
    texts = [visible_text(item) for path in TRAJECTORIES for item in load_trajectory(path)]
    assert any(text.isascii() for text in texts)
    assert any(not text.isascii() for text in texts)
    assert [words_of(text) for text in texts] == [_WORD_RUNS.findall(t.lower()) for t in texts]


def stable_history_start(
    items: Sequence[Item],
    cuts: Sequence[int],
    tokens: Sequence[int],
    *,
    fitting_start: int,
    step: int,
) -> int:
    """The oracle: where a history that no longer fits is cut, found from its start. Stable
    points are the first of the history's cuts at or after every `step` tokens counted from the
    start; the history starts at the first at or after `fitting_start`, else there; and at the
    latest at the latest user message, when that lies at or after `fitting_start`."""
    users = [
        position
        for position, item in enumerate(items)
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]
    latest_user = max((cut for cut in cuts if users and cut <= users[-1]), default=None)
    keep_user = latest_user is not None and latest_user >= fitting_start
    position, passed, next_mark = 0, 0, step
    for cut in cuts:
        passed += sum(tokens[position:cut])
        position = cut
        if passed >= next_mark:
            if fitting_start <= cut < len(tokens):
                return min(cut, latest_user) if keep_user and latest_user is not None else cut
            next_mark = (passed // step + 1) * step
    return fitting_start


@PROPERTY_SETTINGS
@given(inputs)
def test_the_history_read_from_its_newest_end_is_cut_where_the_whole_would_be(
    inp: AssemblyInput,
) -> None:
    """The fitting reads the history from its newest end only; its cuts and its stable start
    are those of the whole history read from its start (`history_cuts`,
    `stable_history_start`)."""
    items = [entry.item for entry in inp.history]
    assert list(cuts_from_end(items)) == list(reversed(history_cuts(items)))
    fit = decide(inp, count=words).history
    if inp.history_cut_step is not None and fit.fitting_start > 0:
        tokens = [words(visible_text(item)) for item in items]
        assert fit.start == stable_history_start(
            items,
            history_cuts(items),
            tokens,
            fitting_start=fit.fitting_start,
            step=inp.history_cut_step,
        )
    else:
        assert fit.start == fit.fitting_start


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_every_normalized_trajectory_is_cut_alike_from_either_end(path: Path) -> None:
    items = list(normalize_history(load_trajectory(path), count_tokens=words).items)
    assert list(cuts_from_end(items)) == list(reversed(history_cuts(items)))


@pytest.mark.parametrize("path", TRAJECTORIES[::4], ids=lambda path: path.stem)
def test_a_trajectory_too_long_for_its_budget_starts_at_the_stable_point_of_the_whole(
    path: Path,
) -> None:
    items = list(normalize_history(load_trajectory(path), count_tokens=words).items)
    history = tuple(
        HistoryEntry(None, item, id=f"history:{n}", tokens=words(visible_text(item)))
        for n, item in enumerate(items)
    )
    tokens = [entry.tokens or 0 for entry in history]
    cuts = history_cuts(items)
    for share in (0.1, 0.3, 0.6):
        for step_share in (0.02, 0.05, 0.2):
            inp = AssemblyInput(
                contributions=(),
                history=history,
                budget=Budget(max_tokens=int(sum(tokens) * share)),
                history_counts_toward_max_items=False,
                history_cut_step=max(1, int(sum(tokens) * step_share)),
                history_tokens=sum(tokens),
            )
            fit = decide(inp, count=words).history
            assert 0 < fit.fitting_start <= fit.start
            assert fit.start == stable_history_start(
                items, cuts, tokens, fitting_start=fit.fitting_start, step=inp.history_cut_step or 0
            )
