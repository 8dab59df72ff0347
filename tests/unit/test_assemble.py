"""Assembly, one rule per test, on small inputs; every test compares the whole plan.

Tokens are counted as whitespace-separated words, so every size below can be read off the text.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
import pytest

from app.domain.assemble import (
    AssemblyDiff,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    Contribution,
    DropReason,
    Moved,
    PlanEntry,
    ReusedPrefix,
    SelectedItem,
    assemble,
    atomic_groups,
    decide,
    diff_selections,
    place,
    ranking_score,
    reused_prefix,
)
from app.domain.budget import POLICIES, Budget
from app.domain.history import HistoryEntry
from app.domain.items import Item
from app.domain.normalize import find_pairing_violations
from tests.builders import assistant_msg, tool_call, tool_output, user_msg

UNLIMITED_ITEMS = Budget(max_items=None, max_items_per_source=None)


def words(text: str) -> int:
    return len(text.split())


def doc(
    doc_id: str, text: str | None = None, *, source: str = "search", **fields: Any
) -> Candidate:
    """A retrieval candidate, attributed to `file://<id>.py`."""
    fields.setdefault("layer", "retrieval")
    return Candidate(
        id=doc_id,
        source=source,
        content=f"{doc_id} body text" if text is None else text,
        locator=f"file://{doc_id}.py",
        **fields,
    )


def note(note_id: str, text: str, *, source: str = "notes", **fields: Any) -> Candidate:
    """A memory candidate, without a locator."""
    return Candidate(id=note_id, source=source, layer="memory", content=text, **fields)


def task(task_id: str, text: str, *, source: str = "agent", **fields: Any) -> Candidate:
    return Candidate(id=task_id, source=source, layer="task", content=text, **fields)


def contributions(*candidates: Candidate) -> tuple[Contribution, ...]:
    """One contribution per source, in order of first appearance."""
    by_source: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_source.setdefault(candidate.source, []).append(candidate)
    return tuple(Contribution(source, tuple(group)) for source, group in by_source.items())


def shown(c: Candidate, position: int, tokens: int, *, form: str = "raw") -> SelectedItem:
    return SelectedItem(
        id=c.id,
        source=c.source,
        layer=c.layer,
        source_class=c.source_class or c.layer,
        form=form,
        position=position,
        tokens=tokens,
        content=c.content if form == "raw" else c.forms[form],
        item=c.item if form == "raw" else None,
    )


def restated(c: Candidate, position: int, tokens: int) -> SelectedItem:
    return SelectedItem(
        id=f"{c.id}#restated",
        source=c.source,
        layer=c.layer,
        source_class=c.source_class or c.layer,
        form="raw",
        position=position,
        tokens=tokens,
        content=c.content,
        item=c.item,
    )


def kept(c: Candidate, position: int, tokens: int, *, form: str = "raw") -> PlanEntry:
    return PlanEntry(
        id=c.id,
        source=c.source,
        layer=c.layer,
        source_class=c.source_class or c.layer,
        decision="selected",
        reason=None,
        form=form,
        tokens=tokens,
        score=ranking_score(c),
        position=position,
    )


def dropped(c: Candidate, reason: DropReason, tokens: int) -> PlanEntry:
    return PlanEntry(
        id=c.id,
        source=c.source,
        layer=c.layer,
        source_class=c.source_class or c.layer,
        decision="dropped",
        reason=reason,
        form="raw",
        tokens=tokens,
        score=ranking_score(c),
        position=None,
    )


def shown_history(entry: HistoryEntry, position: int, tokens: int) -> SelectedItem:
    return SelectedItem(
        id=entry.id,
        source="history",
        layer="recent",
        source_class="history",
        form="raw",
        position=position,
        tokens=tokens,
        content=None,
        item=entry.item,
    )


def history_entry(
    entry: HistoryEntry,
    tokens: int,
    *,
    position: int | None = None,
    reason: DropReason | None = None,
) -> PlanEntry:
    return PlanEntry(
        id=entry.id,
        source="history",
        layer="recent",
        source_class="history",
        decision="dropped" if reason else "selected",
        reason=reason,
        form="raw",
        tokens=tokens,
        score=None,
        position=position,
    )


def dropped_run(first: int, last: int, tokens: int, reason: DropReason) -> PlanEntry:
    """The plan entry of history entries `first` to `last` dropped for one reason: a run."""
    return PlanEntry(
        id=f"history:{first}-{last}",
        source="history",
        layer="recent",
        source_class="history",
        decision="dropped",
        reason=reason,
        form="raw",
        tokens=tokens,
        score=None,
        position=None,
    )


def expected_hash(items: Sequence[SelectedItem]) -> str:
    rows = [[i.id, i.source, i.layer, i.form, i.content, i.item] for i in items]
    return hashlib.sha256(orjson.dumps(rows, option=orjson.OPT_SORT_KEYS)).hexdigest()


def plan_of(
    items: Sequence[SelectedItem],
    entries: Sequence[PlanEntry],
    *,
    truncated: bool,
    over_budget: bool = False,
) -> AssemblyPlan:
    by_class: Counter[str] = Counter()
    for item in items:
        by_class[item.source_class] += item.tokens
    return AssemblyPlan(
        items=tuple(items),
        plan=tuple(entries),
        total_tokens=sum(item.tokens for item in items),
        truncated=truncated,
        over_budget=over_budget,
        by_source_class=dict(sorted(by_class.items())),
        plan_hash=expected_hash(items),
    )


def history_of(*items: Item) -> tuple[HistoryEntry, ...]:
    return tuple(HistoryEntry(None, item, id=f"seq:{n}") for n, item in enumerate(items, 1))


def reasoning(text: str) -> Item:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}


# Scores and presets.


def test_ranking_score_weighs_relevance_priority_trust_and_freshness() -> None:
    c = doc("a", relevance=0.5, priority=0.4, trust=0.2, freshness=0.1)
    assert ranking_score(c) == pytest.approx(0.5 + 0.1 + 0.03 + 0.01)


def test_policies_are_the_three_presets_with_balanced_as_default() -> None:
    assert {
        "balanced": Budget(
            max_items=12, max_tokens=4000, max_items_per_source=6, max_tokens_per_source=2500
        ),
        "compact": Budget(
            max_items=8, max_tokens=2500, max_items_per_source=4, max_tokens_per_source=1200
        ),
        "expansive": Budget(
            max_items=20, max_tokens=8000, max_items_per_source=8, max_tokens_per_source=3500
        ),
    } == POLICIES
    assert Budget() == POLICIES["balanced"]
    assert AssemblyInput(contributions=()).budget == POLICIES["balanced"]


def test_candidate_needs_exactly_one_of_content_and_item() -> None:
    for bad in (
        Candidate(id="a", source="s"),
        Candidate(id="a", source="s", content="text", item=user_msg("text")),
    ):
        contribution = Contribution(source="s", candidates=(bad,))
        with pytest.raises(ValueError, match="exactly one"):
            assemble(AssemblyInput(contributions=(contribution,)), count_tokens=words)


def test_empty_input_gives_an_empty_plan() -> None:
    assert assemble(AssemblyInput(contributions=()), count_tokens=words) == plan_of(
        [], [], truncated=False
    )


# Selection rules, in order.


def test_later_contribution_supersedes_earlier_one_of_same_source() -> None:
    a, b, c = doc("a"), doc("b"), doc("c")
    n = note("n", "note text")
    inp = AssemblyInput(
        contributions=(
            Contribution("search", (a, b)),
            Contribution("notes", (n,)),
            Contribution("search", (c,)),
        ),
        placement="input_order",
    )
    # The surviving `search` contribution comes after `notes`, and is placed there.
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(n, 0, 2), shown(c, 1, 3)],
        [
            dropped(a, "superseded_contribution", 3),
            dropped(b, "superseded_contribution", 3),
            kept(n, 0, 2),
            kept(c, 1, 3),
        ],
        truncated=False,
    )


def test_retrieval_candidate_without_locator_is_dropped_unattributed() -> None:
    bare = Candidate(id="bare", source="search", layer="retrieval", content="no locator here")
    attributed = doc("a")
    memory = note("m", "memory needs none")
    inp = AssemblyInput(
        contributions=contributions(bare, attributed, memory), placement="input_order"
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(attributed, 0, 3), shown(memory, 1, 3)],
        [dropped(bare, "unattributed", 3), kept(attributed, 0, 3), kept(memory, 1, 3)],
        truncated=False,
    )


def test_a_candidate_without_a_layer_is_memory_and_kept_without_a_locator() -> None:
    plain = Candidate(id="a", source="notes", content="def f(): pass")
    inp = AssemblyInput(contributions=contributions(plain), placement="input_order")
    assert plain.layer == "memory"
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(plain, 0, 3)], [kept(plain, 0, 3)], truncated=False
    )


def test_duplicate_identity_keeps_required_then_higher_score_then_first_seen() -> None:
    # Same locator from two sources: the higher score wins whatever the id.
    fs_a = doc("a", source="fs", priority=0.55, relevance=0.5)
    rg_a = Candidate(
        id="a-rg",
        source="rg",
        content="a body text",
        locator="file://a.py",
        priority=0.6,
        relevance=0.5,
    )
    # Same id, no locator: required beats a higher score.
    strong_rules = task("rules", "be brief", source="fs", relevance=0.9)
    required_rules = task("rules", "be brief always", source="rg", required=True, relevance=0.1)
    # An exact tie keeps the first seen.
    first = note("m", "same memory", source="fs")
    second = note("m", "other memory", source="rg")
    inp = AssemblyInput(
        contributions=(
            Contribution("fs", (fs_a, strong_rules, first)),
            Contribution("rg", (rg_a, required_rules, second)),
        ),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(first, 0, 2), shown(rg_a, 1, 3), shown(required_rules, 2, 3)],
        [
            dropped(fs_a, "duplicate", 3),
            dropped(strong_rules, "duplicate", 2),
            kept(first, 0, 2),
            kept(rg_a, 1, 3),
            kept(required_rules, 2, 3),
            dropped(second, "duplicate", 2),
        ],
        truncated=False,
    )


def test_candidate_below_min_relevance_is_dropped_unless_required() -> None:
    high, low = doc("hi", relevance=0.8), doc("lo", relevance=0.2)
    goal = task("goal", "ship it", required=True)
    inp = AssemblyInput(
        contributions=contributions(high, low, goal), min_relevance=0.5, placement="input_order"
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(high, 0, 3), shown(goal, 1, 2)],
        [kept(high, 0, 3), dropped(low, "below_relevance", 3), kept(goal, 1, 2)],
        truncated=False,
    )


def test_recall_cap_keeps_only_the_best_retrieval_candidates_of_each_source() -> None:
    d1, d2, d3 = doc("d1", relevance=0.9), doc("d2", relevance=0.5), doc("d3", relevance=0.7)
    memory = note("m", "not retrieval", source="search")
    web = doc("w1", source="web", relevance=0.1)
    inp = AssemblyInput(
        contributions=contributions(d1, d2, d3, memory, web), recall_cap=2, placement="input_order"
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(d1, 0, 3), shown(d3, 1, 3), shown(memory, 2, 2), shown(web, 3, 3)],
        [
            kept(d1, 0, 3),
            dropped(d2, "recall_cap", 3),
            kept(d3, 1, 3),
            kept(memory, 2, 2),
            kept(web, 3, 3),
        ],
        truncated=True,
    )


def test_rank_is_required_then_score_then_relevance_then_fewer_tokens_then_id() -> None:
    # Task items are placed in rank order (required last), which makes the rank visible.
    goal = task("goal", "the goal", required=True)
    top = task("top", "top", relevance=0.9)
    by_relevance = task("by-relevance", "x", relevance=0.6)  # score 0.6
    by_score_tie = task("by-score", "x", relevance=0.5, priority=0.4)  # score 0.6 as well
    cheap, dear = task("cheap", "a", relevance=0.3), task("dear", "a b c", relevance=0.3)
    x, y = task("x", "same", relevance=0.1), task("y", "same", relevance=0.1)
    inp = AssemblyInput(
        contributions=contributions(y, dear, goal, x, by_score_tie, cheap, top, by_relevance),
        budget=UNLIMITED_ITEMS,
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [
            shown(top, 0, 1),
            shown(by_relevance, 1, 1),
            shown(by_score_tie, 2, 1),
            shown(cheap, 3, 1),
            shown(dear, 4, 3),
            shown(x, 5, 1),
            shown(y, 6, 1),
            shown(goal, 7, 2),
        ],
        [
            kept(y, 6, 1),
            kept(dear, 4, 3),
            kept(goal, 7, 2),
            kept(x, 5, 1),
            kept(by_score_tie, 2, 1),
            kept(cheap, 3, 1),
            kept(top, 0, 1),
            kept(by_relevance, 1, 1),
        ],
        truncated=False,
    )


def test_max_items_drops_every_later_non_required_candidate() -> None:
    goal = task("goal", "the goal", required=True)
    a = note("a", "a a a", relevance=0.9)
    b, c = note("b", "b", relevance=0.8), note("c", "c", relevance=0.7)
    inp = AssemblyInput(
        contributions=contributions(a, b, c, goal),
        budget=Budget(max_items=2),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(a, 0, 3), shown(goal, 1, 2)],
        [kept(a, 0, 3), dropped(b, "max_items", 1), dropped(c, "max_items", 1), kept(goal, 1, 2)],
        truncated=True,
    )


def test_required_candidates_are_selected_beyond_the_budget_and_flag_it() -> None:
    goal = task("goal", "one two three four five six", required=True)
    rules = task("rules", "be kind", required=True)
    memory = note("m", "m")
    inp = AssemblyInput(
        contributions=contributions(goal, rules, memory),
        budget=Budget(max_items=1, max_tokens=5),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(goal, 0, 6), shown(rules, 1, 2)],
        [kept(goal, 0, 6), kept(rules, 1, 2), dropped(memory, "max_items", 1)],
        truncated=True,
        over_budget=True,
    )


def test_near_duplicate_retrieval_text_is_dropped_case_insensitively() -> None:
    text = " ".join(f"word{n}" for n in range(30))
    # 26 shingles each, 25 shared: Jaccard 25/27 = 0.93.
    echo = " ".join(f"WORD{n}" for n in range(29)) + " changed"
    first = doc("first", text, relevance=0.9)
    second = doc("second", echo, relevance=0.8)
    other = doc("other", "a different text altogether about pairing", relevance=0.7)
    memory = note("memory", text, relevance=0.1)  # only retrieval is compared
    inp = AssemblyInput(
        contributions=contributions(first, second, other, memory), placement="input_order"
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(first, 0, 30), shown(other, 1, 6), shown(memory, 2, 30)],
        [
            kept(first, 0, 30),
            dropped(second, "near_duplicate", 30),
            kept(other, 1, 6),
            kept(memory, 2, 30),
        ],
        truncated=False,
    )


def test_near_duplicate_at_exactly_the_threshold_is_dropped_and_just_below_is_kept() -> None:
    # 14 words: 10 shingles. The echo keeps the first 13 words: 9 shingles, all shared, so
    # Jaccard 9/10 = 0.9; the variant changes word 9 as well: 4 shared of 15, well below.
    words14 = [f"w{n}" for n in range(14)]
    first = doc("first", " ".join(words14), relevance=0.9)
    echo = doc("echo", " ".join(words14[:13]), relevance=0.8)
    variant = doc("variant", " ".join([*words14[:9], "x", *words14[10:13]]), relevance=0.7)
    inp = AssemblyInput(
        contributions=contributions(first, echo, variant),
        placement="input_order",
        near_duplicate_threshold=0.9,
    )
    decisions = [(e["id"], e["reason"]) for e in assemble(inp, count_tokens=words).plan]
    assert decisions == [("first", None), ("echo", "near_duplicate"), ("variant", None)]


def test_item_quota_groups_by_source_class_then_locator_scheme_then_layer() -> None:
    c1 = note("c1", "class one", source_class="notes", relevance=0.9)
    c2 = note("c2", "class two", source_class="notes", relevance=0.8)
    f1, f2 = doc("f1", relevance=0.7), doc("f2", relevance=0.6)
    web = Candidate(
        id="g1", source="search", content="web page", locator="https://x.org", relevance=0.5
    )
    m1, m2 = note("m1", "plain one", relevance=0.4), note("m2", "plain two", relevance=0.3)
    t1 = task("t1", "a task", relevance=0.2)
    inp = AssemblyInput(
        contributions=contributions(c1, c2, f1, f2, web, m1, m2, t1),
        budget=Budget(max_items_per_source=1),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(c1, 0, 2), shown(m1, 1, 2), shown(f1, 2, 3), shown(web, 3, 2), shown(t1, 4, 2)],
        [
            kept(c1, 0, 2),
            dropped(c2, "source_max_items", 2),
            kept(m1, 1, 2),
            dropped(m2, "source_max_items", 2),
            kept(f1, 2, 3),
            dropped(f2, "source_max_items", 3),
            kept(web, 3, 2),
            kept(t1, 4, 2),
        ],
        truncated=True,
    )


def test_token_bounds_skip_a_candidate_and_later_cheaper_ones_still_fit() -> None:
    big = note("big", "five words in this one", source_class="a", relevance=0.9)
    a1 = note("a1", "four words right here", source_class="a", relevance=0.8)
    b1 = note("b1", "four more words here", source_class="b", relevance=0.7)
    b2 = note("b2", "three more words", source_class="c", relevance=0.6)
    tiny = note("tiny", "two words", source_class="c", relevance=0.5)
    inp = AssemblyInput(
        contributions=contributions(big, a1, b1, b2, tiny),
        budget=Budget(max_tokens=10, max_tokens_per_source=4),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [shown(a1, 0, 4), shown(b1, 1, 4), shown(tiny, 2, 2)],
        [
            dropped(big, "source_max_tokens", 5),
            kept(a1, 0, 4),
            kept(b1, 1, 4),
            dropped(b2, "max_tokens", 3),
            kept(tiny, 2, 2),
        ],
        truncated=True,
    )


def test_candidate_that_does_not_fit_degrades_to_skeleton_then_reference() -> None:
    a = note("a", "six words of plain memory text", relevance=0.9)
    b = note(
        "b",
        "eight words that will not fit in raw",
        forms={"skeleton": "four word skeleton form", "reference": "see b"},
        relevance=0.8,
    )
    message = Candidate(
        id="msg",
        source="chat",
        layer="memory",
        item=assistant_msg("five words in a message"),
        forms={"skeleton": "three word skeleton", "reference": "see msg"},
        relevance=0.7,
    )
    d = note("d", "no forms here", relevance=0.6)
    inp = AssemblyInput(
        contributions=contributions(a, b, message, d),
        budget=Budget(max_tokens=12),
        placement="input_order",
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [
            shown(a, 0, 6),
            shown(b, 1, 4, form="skeleton"),
            shown(message, 2, 2, form="reference"),
        ],
        [
            kept(a, 0, 6),
            kept(b, 1, 4, form="skeleton"),
            dropped(d, "max_tokens", 3),
            kept(message, 2, 2, form="reference"),
        ],
        truncated=True,
    )


def test_tokens_given_by_the_caller_are_used_and_each_text_is_counted_once() -> None:
    counted: list[str] = []

    def counting(text: str) -> int:
        counted.append(text)
        return words(text)

    given = doc("given", tokens=50)
    twin_a = note("twin-a", "same words here")
    twin_b = note("twin-b", "same words here", forms={"skeleton": "same"})
    inp = AssemblyInput(contributions=contributions(given, twin_a, twin_b), placement="input_order")
    assert assemble(inp, count_tokens=counting) == plan_of(
        [shown(given, 0, 50), shown(twin_a, 1, 3), shown(twin_b, 2, 3)],
        [kept(given, 0, 50), kept(twin_a, 1, 3), kept(twin_b, 2, 3)],
        truncated=False,
    )
    assert counted == ["same words here"]


# Placement.


def test_edges_placement_orders_prefix_history_middle_task_and_restatement() -> None:
    p_b = Candidate(id="b", source="sys", layer="prefix", content="prefix b", relevance=0.9)
    p_a = Candidate(id="a", source="sys", layer="prefix", content="prefix a", relevance=0.1)
    p_z = Candidate(id="z", source="agents", layer="prefix", content="prefix z", relevance=0.5)
    memory = note("mem", "a memory", relevance=0.9)
    r1, r2 = doc("r1", relevance=0.8), doc("r2", relevance=0.7)
    r3, r4 = doc("r3", relevance=0.6), doc("r4", relevance=0.5)
    step = task("step", "next step", relevance=0.4)
    goal = task("goal", "the goal", required=True, restate_at_end=True)
    rec1 = Candidate(id="rec1", source="chat", layer="recent", content="older turn", relevance=0.1)
    rec2 = Candidate(id="rec2", source="chat", layer="recent", content="newer turn", relevance=0.9)
    h1, h2 = history_of(user_msg("hello there"), assistant_msg("hi"))
    inp = AssemblyInput(
        contributions=contributions(p_b, p_a, p_z, r4, r1, memory, r3, r2, goal, step, rec1, rec2),
        history=(h1, h2),
        budget=UNLIMITED_ITEMS,
    )
    assert assemble(inp, count_tokens=words) == plan_of(
        [
            shown(p_z, 0, 2),
            shown(p_a, 1, 2),
            shown(p_b, 2, 2),
            # Middle block by rank mem > r1 > r2 > r3 > r4, alternating from both edges.
            # The history follows the prefix; what changes between calls follows the history.
            shown_history(h1, 3, 2),
            shown_history(h2, 4, 1),
            shown(memory, 5, 2),
            shown(r2, 6, 3),
            shown(r4, 7, 3),
            shown(r3, 8, 3),
            shown(r1, 9, 3),
            shown(step, 10, 2),
            shown(goal, 11, 2),
            shown(rec1, 12, 2),
            shown(rec2, 13, 2),
            restated(goal, 14, 2),
        ],
        [
            kept(p_b, 2, 2),
            kept(p_a, 1, 2),
            kept(p_z, 0, 2),
            kept(r4, 7, 3),
            kept(r1, 9, 3),
            kept(r3, 8, 3),
            kept(r2, 6, 3),
            kept(memory, 5, 2),
            kept(goal, 11, 2),
            kept(step, 10, 2),
            kept(rec1, 12, 2),
            kept(rec2, 13, 2),
            history_entry(h1, 2, position=3),
            history_entry(h2, 1, position=4),
        ],
        truncated=False,
    )


def test_prefix_bytes_do_not_change_when_a_retrieval_item_changes() -> None:
    rules = Candidate(id="rules", source="sys", layer="prefix", content="be safe", required=True)
    tools = Candidate(id="tools", source="sys", layer="prefix", content="tool list", priority=1.0)
    before = AssemblyInput(
        contributions=contributions(tools, doc("a", relevance=0.2), rules), placement="edges"
    )
    after = AssemblyInput(
        contributions=contributions(
            doc("b", relevance=0.9), rules, doc("a", "a changed body", relevance=0.3), tools
        ),
    )
    old, new = assemble(before, count_tokens=words), assemble(after, count_tokens=words)
    assert [(i.fingerprint, i.tokens) for i in new.items[:2]] == [
        (i.fingerprint, i.tokens) for i in old.items[:2]
    ]
    assert [(i.id, i.layer) for i in new.items] == [
        ("rules", "prefix"),
        ("tools", "prefix"),
        ("b", "retrieval"),
        ("a", "retrieval"),
    ]
    assert reused_prefix(
        [(i.fingerprint, i.tokens) for i in old.items],
        [(i.fingerprint, i.tokens) for i in new.items],
    ) == ReusedPrefix(items=2, tokens=4)
    assert old.plan_hash != new.plan_hash


def test_a_restatement_is_the_copy_at_the_end_and_is_charged_on_its_own_tokens() -> None:
    goal = task(
        "goal",
        "fix the bug in the parser and keep the tests green",
        restate_at_end=True,
        restatement="fix the bug …",
        relevance=0.9,
    )
    memory = note("m", "a memory", relevance=0.5)
    # 11 + 4 for the goal's two copies, 2 for the memory: 17 fits; the whole goal twice would not.
    edges = AssemblyInput(contributions=contributions(goal, memory), budget=Budget(max_tokens=17))
    at_end = SelectedItem(
        id="goal#restated",
        source="agent",
        layer="task",
        source_class="task",
        form="raw",
        position=2,
        tokens=4,
        content="fix the bug …",
        item=None,
    )
    assert assemble(edges, count_tokens=words) == AssemblyPlan(
        items=(shown(memory, 0, 2), shown(goal, 1, 11), at_end),
        plan=(kept(goal, 1, 11), kept(memory, 0, 2)),
        total_tokens=17,
        truncated=False,
        over_budget=False,
        by_source_class={"memory": 2, "task": 15},
        plan_hash=expected_hash([shown(memory, 0, 2), shown(goal, 1, 11), at_end]),
    )


def test_restated_candidate_is_repeated_last_and_charged_twice_only_with_edges() -> None:
    goal = task("goal", "fix the bug", restate_at_end=True, relevance=0.9)
    memory = note("m", "a memory", relevance=0.5)
    budget = Budget(max_tokens=7)
    edges = AssemblyInput(contributions=contributions(goal, memory), budget=budget)
    assert assemble(edges, count_tokens=words) == AssemblyPlan(
        items=(shown(goal, 0, 3), restated(goal, 1, 3)),
        plan=(kept(goal, 0, 3), dropped(memory, "max_tokens", 2)),
        total_tokens=6,
        truncated=True,
        over_budget=False,
        by_source_class={"task": 6},
        plan_hash=expected_hash([shown(goal, 0, 3), restated(goal, 1, 3)]),
    )
    in_order = AssemblyInput(
        contributions=contributions(goal, memory), budget=budget, placement="input_order"
    )
    assert assemble(in_order, count_tokens=words) == AssemblyPlan(
        items=(shown(goal, 0, 3), shown(memory, 1, 2)),
        plan=(kept(goal, 0, 3), kept(memory, 1, 2)),
        total_tokens=5,
        truncated=False,
        over_budget=False,
        by_source_class={"memory": 2, "task": 3},
        plan_hash=expected_hash([shown(goal, 0, 3), shown(memory, 1, 2)]),
    )


# History.

TURNS = history_of(
    user_msg("fix the bug"),  # 3 tokens
    tool_call("c1", "sh", "ls"),  # "sh\nls": 2
    tool_output("c1", "a.py b.py"),  # 2
    reasoning("think hard"),  # 2
    tool_call("c2", "sh", "cat a.py"),  # 3
    tool_output("c2", "x = 1"),  # 3
    assistant_msg("done now"),  # 2
)
TURN_TOKENS = [3, 2, 2, 2, 3, 3, 2]


def test_history_takes_the_newest_atomic_groups_that_fit_as_a_suffix() -> None:
    goal = task("goal", "the goal", required=True)
    inp = AssemblyInput(
        contributions=contributions(goal), history=TURNS, budget=Budget(max_tokens=15)
    )
    # 2 for the goal, then 2 (message), 8 (reasoning + call + output): 12. The c1 pair (4) does
    # not fit; the first message (3) would, but history is a contiguous suffix.
    plan = assemble(inp, count_tokens=words)
    assert (
        plan
        == plan_of(
            [
                *(shown_history(TURNS[k], k - 3, TURN_TOKENS[k]) for k in range(3, 7)),
                shown(goal, 4, 2),  # a task item: after the history
            ],
            [
                kept(goal, 4, 2),
                dropped_run(0, 2, sum(TURN_TOKENS[:3]), "max_tokens"),
                *(history_entry(TURNS[k], TURN_TOKENS[k], position=k - 3) for k in range(3, 7)),
            ],
            truncated=True,
        )
    )
    assert find_pairing_violations([i.item for i in plan.items if i.item is not None]) == []


def test_a_required_addition_that_changes_no_decision_decides_alike() -> None:
    """`decide` then `place` is `assemble`; a required candidate added after the others (as an
    elision notice is) leaves the decisions alike while the room it takes moves nothing, and
    not once it pushes a history group out."""
    goal = task("goal", "the goal", required=True)
    base = AssemblyInput(
        contributions=contributions(goal), history=TURNS, budget=Budget(max_tokens=15)
    )
    decided = decide(base, count=words)
    assert place(base, decided, count=words) == assemble(base, count_tokens=words)

    def with_notice(text: str) -> AssemblyInput:
        notice = Contribution("elision", (task("elided", text, required=True),))
        return replace(base, contributions=(*base.contributions, notice))

    # 12 of 15 tokens are taken: a 3-word notice fits beside them, a 4-word one does not.
    fits_beside = decide(with_notice("one two three"), count=words)
    pushes_out = decide(with_notice("one two three four"), count=words)
    assert fits_beside.alike(decided, candidates=1)
    assert not pushes_out.alike(decided, candidates=1)
    assert pushes_out.history.start > decided.history.start


def test_history_never_keeps_an_output_without_its_call() -> None:
    # Item by item, the c2 output (3) would fit after the last message (2) but its call would
    # not: the whole group stops the walk.
    inp = AssemblyInput(contributions=(), history=TURNS, budget=Budget(max_tokens=6))
    plan = assemble(inp, count_tokens=words)
    assert plan == plan_of(
        [shown_history(TURNS[6], 0, 2)],
        [
            dropped_run(0, 5, sum(TURN_TOKENS[:6]), "max_tokens"),
            history_entry(TURNS[6], 2, position=0),
        ],
        truncated=True,
    )


def test_history_counts_toward_max_items_only_when_asked() -> None:
    memory = note("m", "a memory")
    history = history_of(user_msg("one"), assistant_msg("two"), user_msg("three"))
    counted = AssemblyInput(
        contributions=contributions(memory), history=history, budget=Budget(max_items=3)
    )
    assert assemble(counted, count_tokens=words) == plan_of(
        [shown_history(history[1], 0, 1), shown_history(history[2], 1, 1), shown(memory, 2, 2)],
        [
            kept(memory, 2, 2),
            history_entry(history[0], 1, reason="max_items"),
            history_entry(history[1], 1, position=0),
            history_entry(history[2], 1, position=1),
        ],
        truncated=True,
    )
    uncounted = AssemblyInput(
        contributions=contributions(memory),
        history=history,
        budget=Budget(max_items=1),
        history_counts_toward_max_items=False,
    )
    assert assemble(uncounted, count_tokens=words) == plan_of(
        [*(shown_history(h, n, 1) for n, h in enumerate(history)), shown(memory, 3, 2)],
        [kept(memory, 3, 2), *(history_entry(h, 1, position=n) for n, h in enumerate(history))],
        truncated=False,
    )


def test_atomic_groups_bind_calls_outputs_and_the_reasoning_before_them() -> None:
    items = [
        reasoning("alone"),
        user_msg("hi"),
        reasoning("a"),
        reasoning("b"),
        tool_call("c1"),
        tool_call("c2"),
        tool_output("c1", "x"),
        tool_output("c2", "y"),
        assistant_msg("ok"),
        tool_call("c3"),
        tool_output("c3", "z"),
    ]
    assert atomic_groups(items) == (
        range(0, 1),
        range(1, 2),
        range(2, 8),
        range(8, 9),
        range(9, 11),
    )


# Fingerprints, diffs and cache reuse.


def test_fingerprint_hashes_what_the_model_sees() -> None:
    item = SelectedItem(
        id="a",
        source="s",
        layer="memory",
        source_class="memory",
        form="raw",
        position=3,
        tokens=7,
        content="héllo",
        item=None,
    )
    canonical = '["a","s","raw","héllo",null]'.encode()
    assert item.fingerprint == hashlib.sha256(canonical).hexdigest()[:16]
    # Position and accounting do not change what the model sees.
    moved = item._replace(position=0, tokens=1, source_class="x")
    assert moved.fingerprint == item.fingerprint
    # JSON integers beyond 64 bits (which orjson refuses) hash through the standard library.
    huge = item._replace(content=None, item={"type": "message", "n": 2**70, "a": 1})
    canonical = f'["a","s","raw",null,{{"a":1,"n":{2**70},"type":"message"}}]'.encode()
    assert huge.fingerprint == hashlib.sha256(canonical).hexdigest()[:16]


def test_diff_selections_lists_added_removed_and_moved_ids() -> None:
    assert diff_selections(
        [("a", 0), ("b", 1), ("c", 2)], [("c", 0), ("a", 1), ("d", 2)], tokens_delta=-5
    ) == AssemblyDiff(
        added=("d",),
        removed=("b",),
        moved=(Moved(id="c", from_position=2, to_position=0), Moved("a", 0, 1)),
        tokens_delta=-5,
    )
    assert diff_selections([("a", 0)], [("a", 0)], tokens_delta=0) == AssemblyDiff(
        added=(), removed=(), moved=(), tokens_delta=0
    )


def test_reused_prefix_is_the_common_leading_run_and_where_it_ends() -> None:
    previous = [("f1", 10), ("f2", 5), ("f3", 7)]
    changed_third = [("f1", 10), ("f2", 5), ("g", 7), ("f3", 7)]
    assert reused_prefix(previous, changed_third) == ReusedPrefix(items=2, tokens=15)
    assert reused_prefix(previous, [*previous, ("f4", 9)]) == ReusedPrefix(items=3, tokens=22)
    assert reused_prefix(previous, [("g", 1), *previous]) == ReusedPrefix(items=0, tokens=0)
    assert reused_prefix([], previous) == ReusedPrefix(items=0, tokens=0)
    # A shorter call ends the run; tokens are the current call's, even if they were recounted.
    assert reused_prefix(previous, [("f1", 11)]) == ReusedPrefix(items=1, tokens=11)
