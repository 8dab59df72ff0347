"""The session view, advanced fact by fact, equals one built from scratch: at every seq of every
trajectory and of random logs with forks, retractions, resets, compactions, world-state
fragments and malformed items, its normalized history, report, seqs and token counts are those
of normalizing the whole active history at once; and the fold's shared columns never show one
fold another's facts."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.advice import history_figures
from app.domain.advice_figures import FiguresDigest, digest_of, figures_of
from app.domain.compaction.clearing import is_cleared_output
from app.domain.elision import Elided, Shown, elided
from app.domain.facts import EMPTY_FOLD, ActiveHistory, Fold, fold_facts, fork_fold
from app.domain.facts.kinds import (
    COMPACTION_FACT,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
)
from app.domain.history import HistoryEntry
from app.domain.items import Item, visible_text
from app.domain.normalize import NormalizeResult, normalize_history, normalize_part
from app.domain.session_view import (
    ActiveColumns,
    HistoryView,
    ViewSettings,
    active_columns,
    view_of,
)
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import is_state_fragment, render_goal
from tests.builders import Fact
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
    offered = [j for j, item in enumerate(expected.items) if not is_state_fragment(item)]
    assert list(view.offered_positions) == offered
    assert list(view.offered_history()) == [
        HistoryEntry(view.seqs[j], expected.items[j], True, view.tokens[j], f"history:{n}")
        for n, j in enumerate(offered)
    ]
    assert view.offered_tokens == sum(view.tokens[j] for j in offered)
    assert view.total_tokens == sum(view.tokens)


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
        active_columns(active),
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


# What a context leaves out, read from runs kept with the view, against every fact read whole.

STRATEGIES = ("summary", "clear_tool_results", "truncate", "handoff")


def _log_with_placeholders(rng: random.Random, length: int) -> list[Fact]:
    """A random log whose compactions also write cleared placeholders for outputs they took."""
    log = _random_log(rng, length)
    rewritten: list[Fact] = []
    outputs: dict[int, str] = {}
    for fact in log:
        if fact.type == "function_call_output":
            outputs[fact.seq] = str(fact.item["call_id"])
        if fact.type == COMPACTION_FACT:
            history = list(fact.item["history"])
            kept = {entry["seq"] for entry in history if "seq" in entry}
            for seq, call_id in sorted(outputs.items()):
                if seq not in kept and rng.random() < 0.5:
                    history.append(
                        {
                            "item": {
                                "type": "function_call_output",
                                "call_id": call_id,
                                "output": rng.choice(
                                    ["[tool output cleared by contextd: see fact seq 1]", "gist"]
                                ),
                            }
                        }
                    )
            item = {**fact.item, "history": history, "strategy": rng.choice(STRATEGIES)}
            fact = Fact(fact.seq, fact.type, item, {}, None, 0)
        rewritten.append(fact)
    return rewritten


def _whole(
    active: ActiveHistory, shown: dict[int, Shown], *, default_drop: str, record_tokens: int
) -> tuple[Elided, ...]:
    """The oracle: every history fact's status, read from the whole active history."""
    items = list(active.items)
    part = normalize_part(
        list(enumerate(items)),
        count_tokens=quarter_bytes,
        input_modalities=frozenset({"text"}),
        truncation=SMALL_OUTPUTS,
        item_metadata=list(active.metadata),
        seqs=list(active.seqs),
    )
    row_of = {source: row for row, source in enumerate(part.sources) if source is not None}
    excluded = {entry.index: entry.reason for entry in part.report.excluded}

    def key(item: Item) -> tuple[str, object] | None:
        kind = str(item.get("type"))
        return (kind, item.get("call_id")) if kind.endswith(("_call", "_output")) else None

    def is_history(seq: int) -> bool:
        entry = active.logged[seq]
        return (
            bool(entry[4])
            and seq > active.reset_at
            and seq not in active.retracted
            and not is_state_fragment(entry[1])
        )

    history = [seq for seq in active.logged if is_history(seq)]
    first_by_key: dict[tuple[str, object], int] = {}
    for seq in history:
        if (found := key(active.logged[seq][1])) is not None:
            first_by_key.setdefault(found, seq)
    source_of: dict[int, tuple[int, bool]] = {}
    for position, (item, fact) in enumerate(zip(items, active.seqs, strict=True)):
        if fact is not None:
            source_of[fact] = (position, False)
        elif (found := key(item)) is not None and found in first_by_key:
            source_of[first_by_key[found]] = (position, True)
    ranges: list[list[Any]] = []
    extends = False
    for seq in history:
        status: tuple[str, str, int] | None
        if seq not in source_of:
            compaction, strategy = active.compacted_by.get(seq, ("", "truncate"))
            form = {
                "summary": "summarized",
                "notes": "summarized",
                "handoff": "externalized",
                "clear_tool_results": "cleared",
            }.get(strategy, "dropped")
            recorded = form in ("summarized", "externalized")
            if recorded and active.compaction_id is not None:
                compaction = active.compaction_id
            status = (form, f"compaction {compaction}", record_tokens if recorded else 0)
        else:
            source, written = source_of[seq]
            row = row_of.get(source)
            if source in excluded:
                status = ("excluded", f"normalization: {excluded[source]}", 0)
            elif row is None:
                status = ("excluded", "normalization: removed", 0)
            elif row not in shown:
                status = ("dropped", default_drop, 0)
            elif shown[row].dropped is not None:
                status = ("dropped", str(shown[row].dropped), 0)
            elif written:
                form = "cleared" if is_cleared_output(part.items[row]) else "truncated"
                compaction = active.compacted_by.get(seq, ("", ""))[0]
                status = (form, f"compaction {compaction}", shown[row].tokens)
            elif part.items[row] != items[source]:
                status = ("truncated", "truncation policy", shown[row].tokens)
            elif shown[row].cut:
                status = ("truncated", "max_tokens", shown[row].tokens)
            else:
                status = None
        if status is None:
            extends = False
            continue
        tokens = active.logged[seq][4] or 0
        last = ranges[-1] if ranges and extends else None
        extends = True
        if last is not None and (last[2], last[3]) == status[:2]:
            last[1] = seq
            last[4] += tokens
            if status[0] not in ("summarized", "externalized"):
                last[5] += status[2]
        else:
            ranges.append([seq, seq, status[0], status[1], tokens, status[2]])
    return tuple(
        Elided(first, last, form, full, shown_tokens, reason)
        for first, last, form, reason, full, shown_tokens in ranges
    )


@settings(max_examples=80, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=70))
def test_what_a_context_leaves_out_is_read_alike_from_runs_and_from_every_fact(
    rng: Any, length: int
) -> None:
    log = _log_with_placeholders(rng, length)
    fold = EMPTY_FOLD
    for fact in log:
        fold = fold_facts(fold, [fact], last_seq=fact.seq)
        if rng.random() < 0.5:
            continue
        active = _active(fold)
        view = _view(active)
        rows = len(view)
        first_shown = rng.randint(0, rows)
        shown = {
            row: Shown(tokens=rng.randint(0, 9), dropped=None, cut=rng.random() < 0.2)
            for row in range(first_shown, rows)
        }
        default_drop = rng.choice(["window", "max_items"])
        if default_drop == "max_items":
            for row in range(rng.randint(0, first_shown), first_shown):
                shown[row] = Shown(tokens=0, dropped="window")
        record_tokens = rng.randint(0, 50)
        # Kept with the log, as the service keeps it: a new epoch carries on from the last.
        found, base = elided(
            active.logged.derived.get("elisions"),
            active,
            view,
            shown=shown,
            default_drop=default_drop,
            record_tokens=record_tokens,
        )
        active.logged.derived["elisions"] = base
        assert found == _whole(
            active, shown, default_drop=default_drop, record_tokens=record_tokens
        )
