"""A checkpoint restored and folded on equals the log folded whole: at many seqs of every
trajectory and of random logs with forks' inherited items, retractions, resets, compactions,
placeholders, world-state fragments and malformed items, the active history, the session view,
advice's figures and what a context leaves out are the same; and a restored fold reads from
the log only the items a call reads."""

from __future__ import annotations

import itertools
import json
import random
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.checkpoint import CHECKPOINT_FORMAT, checkpoint_of, restored
from app.domain.column_codec import MIN_COLUMN, Ascends, Later, Plain, Span, decoded, encoded
from app.domain.elision import Shown
from app.domain.facts import EMPTY_FOLD, ActiveHistory, Fold, fold_facts
from app.domain.facts.stored_items import (
    READ_CHUNK,
    ItemStore,
    SortedIndex,
    StoredFact,
)
from app.domain.normalize import DEFAULT_MODALITIES
from app.domain.record_delta import applied, delta_of
from app.domain.truncation import TruncationPolicy
from app.usecases.loaded_history import LoadedHistory
from tests.builders import Fact
from tests.unit.test_session_view import _log_with_placeholders, _same_active

TRAJECTORIES = sorted((Path(__file__).parents[1] / "data" / "trajectories").glob("*.jsonl"))
SMALL_OUTPUTS = TruncationPolicy(limit=40)


def _trajectory_log(path: Path) -> list[Fact]:
    items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        Fact(seq, str(item.get("type")), item, {"n": seq}, "explore" if seq % 7 else None, 3)
        for seq, item in enumerate(items, start=1)
    ]


def _active(fold: Fold) -> ActiveHistory:
    return ActiveHistory.of(
        fold, session_pk=1, encoding="o200k_base", context_window=8000, unit=None
    )


def _loaded(fold: Fold) -> LoadedHistory:
    return LoadedHistory(
        active=_active(fold),
        encoding="o200k_base",
        input_modalities=DEFAULT_MODALITIES,
        truncation=SMALL_OUTPUTS,
    )


def _shown(loaded: LoadedHistory, rng: random.Random) -> dict[int, Shown]:
    rows = len(loaded.view)
    first = rng.randint(0, rows)
    return {
        row: Shown(tokens=rng.randint(0, 9), dropped=None, cut=rng.random() < 0.2)
        for row in range(first, rows)
    }


def _derive(loaded: LoadedHistory, shown: Mapping[int, Shown]) -> tuple[Any, ...]:
    """Everything a session-mode call reads of the history, derived the way the service does
    (and so kept with the fold for the next call, and for a checkpoint)."""
    view = loaded.view
    return (
        view.result(),
        list(view.seqs),
        list(view.tokens),
        list(view.offered_positions),
        list(view.offered_history()),
        view.total_tokens,
        view.offered_tokens,
        loaded.figures,
        loaded.elided(shown, default_drop="window", record_tokens=11),
    )


class _Log:
    """The log's facts by seq, read as the storage shell reads them, counting the reads."""

    def __init__(self, log: Sequence[Fact]) -> None:
        self.facts = {fact.seq: fact for fact in log}
        self.read: list[int] = []

    def __call__(self, seqs: Sequence[int]) -> dict[int, StoredFact]:
        self.read.extend(seqs)
        # Read back as JSON, as the database gives it: a new object, equal to the one folded.
        return {
            seq: orjson.loads(orjson.dumps([self.facts[seq].item, self.facts[seq].provenance]))
            for seq in seqs
        }


def _restored(fold: Fold, log: _Log) -> Fold:
    body = decoded(encoded(checkpoint_of(fold)))
    return restored(body, ItemStore(log, body["logged"]["order"]))


def _check_restored_at(log: list[Fact], at: int, rng: random.Random) -> None:
    """A checkpoint written at `log[:at]` (with what calls there derived), restored, then
    folded on fact by fact, reads at each seq as the log folded whole."""
    fold = fold_facts(EMPTY_FOLD, log[:at], last_seq=log[at - 1].seq)
    _derive(_loaded(fold), _shown(_loaded(fold), rng))
    reader = _Log(log)
    resumed = _restored(fold, reader)
    for n in range(at, len(log) + 1):
        if n > at:
            resumed = fold_facts(resumed, log[n - 1 : n], last_seq=log[n - 1].seq)
        if n > at + 3 and n != len(log) and rng.random() < 0.7:
            continue
        scratch = fold_facts(EMPTY_FOLD, log[:n], last_seq=log[n - 1].seq)
        _same_active(_active(resumed), _active(scratch))
        mine, theirs = _loaded(resumed), _loaded(scratch)
        shown = _shown(theirs, rng)
        assert _derive(mine, shown) == _derive(theirs, shown)


def test_every_trajectory_restored_at_many_seqs() -> None:
    rng = random.Random(7)
    for path in TRAJECTORIES:
        log = _trajectory_log(path)
        for at in sorted({1, len(log) // 3, len(log) // 2, len(log) - 1, len(log)}):
            _check_restored_at(log, at, rng)


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=2, max_value=70))
def test_random_logs_restored_at_any_seq(rng: Any, length: int) -> None:
    log = _log_with_placeholders(rng, length)
    _check_restored_at(log, rng.randint(1, len(log)), rng)


def _read(value: Any) -> Any:
    """A decoded record as plain values: each `Later` part read, each array a list."""
    if isinstance(value, Later):
        return _read(value.value())
    if isinstance(value, array):
        return value.tolist()
    if isinstance(value, dict):
        return {key: _read(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_read(item) for item in value]
    return value


def _check_chain(log: list[Fact], cuts: list[int], rng: random.Random) -> None:
    """A checkpoint written whole at `cuts[0]` and as deltas at each later cut (once taken
    against a fold restored from the chain so far, as a second worker takes it) reads, applied
    link by link, as the checkpoint written whole at each cut, and restores to the same fold."""
    fold = fold_facts(EMPTY_FOLD, log[: cuts[0]], last_seq=log[cuts[0] - 1].seq)
    _derive(_loaded(fold), _shown(_loaded(fold), rng))
    kept = checkpoint_of(fold)
    chain = decoded(encoded(kept))
    handed_over = rng.randrange(len(cuts))
    for n, (start, end) in enumerate(itertools.pairwise(cuts)):
        if n == handed_over:
            # Another worker restores the chain and writes the next link against its own fold.
            fold = _restored(fold, _Log(log))
            kept = checkpoint_of(fold)
        fold = fold_facts(fold, log[start:end], last_seq=log[end - 1].seq)
        _derive(_loaded(fold), _shown(_loaded(fold), rng))
        record = checkpoint_of(fold)
        chain = applied(chain, decoded(encoded(delta_of(record, kept))))
        kept = record
        assert _read(chain) == _read(decoded(encoded(record)))
    resumed = restored(chain, ItemStore(_Log(log), chain["logged"]["order"]))
    scratch = fold_facts(EMPTY_FOLD, log[: cuts[-1]], last_seq=log[cuts[-1] - 1].seq)
    shown = _shown(_loaded(scratch), rng)
    assert _derive(_loaded(resumed), shown) == _derive(_loaded(scratch), shown)


def test_every_trajectory_checkpointed_as_a_chain_of_deltas() -> None:
    rng = random.Random(11)
    for path in TRAJECTORIES:
        log = _trajectory_log(path)
        cuts = sorted({1, *rng.sample(range(1, len(log) + 1), min(8, len(log))), len(log)})
        _check_chain(log, cuts, rng)


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=3, max_value=70))
def test_random_logs_checkpointed_as_a_chain_of_deltas(rng: Any, length: int) -> None:
    log = _log_with_placeholders(rng, length)
    cuts = sorted({*rng.sample(range(1, len(log) + 1), min(5, len(log))), len(log)})
    _check_chain(log, cuts, rng)


def test_a_delta_holds_what_changed_not_the_log() -> None:
    log = _long_log(4_000)
    fold = fold_facts(EMPTY_FOLD, log[:-20], last_seq=log[-21].seq)
    _derive(_loaded(fold), {})
    kept = checkpoint_of(fold)
    whole = len(encoded(kept))
    fold = fold_facts(fold, log[-20:], last_seq=log[-1].seq)
    _derive(_loaded(fold), {})
    delta = encoded(delta_of(checkpoint_of(fold), kept))
    assert len(delta) < whole / 20


def test_a_delta_that_does_not_fit_its_base_is_refused() -> None:
    log = _long_log(200)
    first = fold_facts(EMPTY_FOLD, log[:100], last_seq=log[99].seq)
    second = fold_facts(first, log[100:], last_seq=log[-1].seq)
    delta = decoded(encoded(delta_of(checkpoint_of(second), checkpoint_of(first))))
    shorter = decoded(encoded(checkpoint_of(fold_facts(EMPTY_FOLD, log[:50], last_seq=50))))
    with pytest.raises(ValueError, match="does not start where its base ends"):
        applied(shorter, delta)


def _long_log(facts: int) -> list[Fact]:
    log = [
        Fact(1, "message", {"type": "message", "role": "user", "content": "fix it"}, {}, None, 3)
    ]
    while len(log) < facts:
        n = len(log)
        call = {"type": "function_call", "call_id": f"c{n}", "name": "sh", "arguments": "ls"}
        output = {"type": "function_call_output", "call_id": f"c{n}", "output": f"file{n}.py"}
        log.append(Fact(n + 1, "function_call", call, {}, None, 4))
        log.append(Fact(n + 2, "function_call_output", output, {}, None, 5))
    return log


def test_a_restored_fold_reads_only_what_a_call_reads() -> None:
    log = _long_log(12_000)
    fold = fold_facts(EMPTY_FOLD, log[:-2], last_seq=log[-3].seq)
    loaded = _loaded(fold)
    _derive(loaded, {row: Shown(5, None) for row in range(len(loaded.view) - 40, len(loaded.view))})
    reader = _Log(log)
    resumed = fold_facts(_restored(fold, reader), log[-2:], last_seq=log[-1].seq)
    mine = _loaded(resumed)
    shown = {row: Shown(5, None) for row in range(len(mine.view) - 40, len(mine.view))}
    elided = mine.elided(shown, default_drop="window", record_tokens=0)
    for entry in mine.view.offered_history()[-40:]:
        assert entry.item is not None
    assert (
        mine.figures.history_tokens
        == _loaded(fold_facts(EMPTY_FOLD, log, last_seq=log[-1].seq)).figures.history_tokens
    )
    assert [(e.first_seq, e.last_seq, e.form) for e in elided] == [(1, log[-41].seq, "dropped")]
    # The window's items and the open tail: a chunk or two of the log, not the log.
    assert 40 <= len(reader.read) <= 2 * READ_CHUNK < len(log) / 5
    assert len(set(reader.read)) == len(reader.read)


def test_a_restored_item_is_one_object_wherever_it_is_read() -> None:
    log = _long_log(300)
    fold = fold_facts(EMPTY_FOLD, log, last_seq=log[-1].seq)
    _derive(_loaded(fold), {})
    resumed = _restored(fold, _Log(log))
    loaded = _loaded(resumed)
    view, active = loaded.view, loaded.active
    for row in (0, 100, len(view) - 1):
        source = view.sources[row]
        assert source is not None
        assert view.items[row] is active.items[source]
        assert active.logged.item_of(active.seqs[source] or 0) is active.items[source]


def test_a_checkpoint_of_another_format_is_refused() -> None:
    log = _long_log(10)
    body = decoded(encoded(checkpoint_of(fold_facts(EMPTY_FOLD, log, last_seq=log[-1].seq))))
    assert body["format"] == CHECKPOINT_FORMAT
    with pytest.raises(ValueError, match="format"):
        restored({**body, "format": CHECKPOINT_FORMAT + 1}, ItemStore(_Log(log), []))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)
columns = st.one_of(
    st.lists(
        st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=MIN_COLUMN, max_size=80
    ),
    st.lists(st.booleans(), min_size=MIN_COLUMN, max_size=80),
    st.lists(
        st.none() | st.integers(min_value=-(2**40), max_value=2**40),
        min_size=MIN_COLUMN,
        max_size=80,
    ),
    st.lists(
        st.integers(min_value=2**63, max_value=2**64 - 1) | st.integers(-5, 5),
        min_size=MIN_COLUMN,
        max_size=40,
    ),
    st.lists(st.sampled_from([0, 1, True, False]), min_size=MIN_COLUMN, max_size=40),
    st.lists(
        st.none() | st.sampled_from(["explore", "edit", ""]), min_size=MIN_COLUMN, max_size=60
    ),
    st.lists(st.none() | st.text(max_size=3), min_size=MIN_COLUMN, max_size=300),
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=4),
        st.one_of(
            json_values,
            columns,
            st.lists(
                st.dictionaries(st.text(max_size=2), columns | json_values, max_size=3), max_size=3
            ),
        ),
        max_size=6,
    )
)
def test_the_column_codec_gives_back_what_it_was_given(record: dict[str, Any]) -> None:
    back = _read(decoded(encoded(record)))
    assert back == record
    assert orjson.dumps(back) == orjson.dumps(record)  # types kept: 1 and True stay apart
    # Written again as read back (integer columns as arrays), the same bytes.
    assert encoded(decoded(encoded(record))) == encoded(record)


def test_a_part_written_for_later_is_parsed_when_read() -> None:
    back = decoded(encoded({"rows": Later({"ids": ["a", "b"]}), "n": list(range(40))}))
    later = back["rows"]
    assert isinstance(later, Later)
    assert later.value() == {"ids": ["a", "b"]}
    assert list(back["n"]) == list(range(40))


def test_a_users_data_comes_back_as_it_was_written() -> None:
    """World state may hold the codec's own keys, and long lists of numbers: read back as they
    were (a list stays a list), never taken for a column or a part."""
    world = {
        "$later": [0, 4],
        "$ints": "not a column",
        "files": {"$tail": [0, ["a.py"]], "sizes": list(range(MIN_COLUMN + 8))},
    }
    back = decoded(encoded({"sections": Plain(world), "column": Span(list(range(40)), 40)}))
    assert back["sections"] == world
    assert type(back["sections"]["files"]["sizes"]) is list
    assert list(back["column"]) == list(range(40))


def test_the_column_codec_refuses_what_is_not_its_form() -> None:
    with pytest.raises(ValueError, match="not a column record"):
        decoded(b"{}")
    with pytest.raises(ValueError, match="not a column record"):
        decoded(b"ctxcols1" + bytes(8))
    cut = encoded({"column": list(range(100))})[:-16]
    with pytest.raises(ValueError, match="past the end"):
        decoded(cut)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=60), unique=True, max_size=40).map(sorted),
    st.lists(st.tuples(st.integers(min_value=0, max_value=80), st.integers()), max_size=10),
)
def test_a_sorted_index_reads_as_the_dict_it_stands_for(
    keys: list[int], added: list[tuple[int, int]]
) -> None:
    assert Ascends(keys, len(keys)).value()
    index, expected = (
        SortedIndex.of(keys, ascending=True),
        dict(zip(keys, range(len(keys)), strict=True)),
    )
    assert isinstance(index, SortedIndex)
    for key, value in added:
        index[key] = expected[key] = value
    assert dict(index) == expected
    assert len(index) == len(expected)
    for probe in range(-1, 82):
        assert index.get(probe) == expected.get(probe)
        assert (probe in index) == (probe in expected)
    assert not Ascends([*keys, None], len(keys) + 1).value()
    assert len(keys) < 2 or not Ascends(keys[::-1], len(keys)).value()
