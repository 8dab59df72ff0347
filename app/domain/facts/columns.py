"""The fold's columns: a session's visible entries and its logged facts, each a set of columns
that only grow (`app.domain.growing`), shared by every fold of one session that reads a prefix
of them. In a fold restored from a checkpoint, the items and their metadata are columns read
from the log when first read (`app.domain.facts.stored_items`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from app.domain.column_codec import Ascends, Later, Span
from app.domain.facts.stored_items import (
    UNREAD,
    Column,
    ItemStore,
    SortedIndex,
    held,
    lazy,
    logged_seq,
    prefix,
    read_at_once,
)
from app.domain.growing import Claims, Prefix
from app.domain.items import Item, logged_key

__all__ = ["LoggedColumns", "LoggedUpTo", "Visible", "VisibleColumns"]

Visible = tuple[int | None, Item, dict[str, Any], str | None, int | None]
"""One model-visible entry: the fact's seq (None if a compaction wrote it or a fork inherited
it), the item, its append metadata, its phase and its stored token count (None where none)."""


class VisibleColumns:
    """The visible entries of one epoch of a session's fold, as columns that only grow (see
    `app.domain.growing`): shared by every fold of the epoch, each reading its first `length`.
    `cumulative[n]` is the stored tokens of the first n entries (None counts 0)."""

    def __init__(self, entries: Iterable[Visible] = ()) -> None:
        self.seqs: list[int | None] = []
        self.items: Column[Item] = []
        self.metadata: Column[dict[str, Any]] = []
        self.phases: list[str | None] = []
        self.tokens: list[int | None] = []
        self.cumulative: list[int] = [0]
        self.phase_set: list[int] = []
        """`phase_set[n]`: the newest of the first n + 1 entries with a phase (-1: none)."""
        self.index_of: MutableMapping[int, int] = {}
        """Each logged fact's position among the entries."""
        self.written: list[int] = []
        """The positions of the entries no fact of this session's log is (a compaction wrote
        them, or a fork inherited them)."""
        self.claims = Claims()
        for entry in entries:
            self.append(entry)

    def __len__(self) -> int:
        return len(self.items)

    def append(self, entry: Visible) -> None:
        seq, item, metadata, phase, tokens = entry
        if seq is None:
            self.written.append(len(self.items))
        else:
            self.index_of[seq] = len(self.items)
        self.seqs.append(seq)
        self.items.append(item)
        self.metadata.append(metadata)
        self.phases.append(phase)
        self.tokens.append(tokens)
        self.cumulative.append(self.cumulative[-1] + (tokens or 0))
        previous = self.phase_set[-1] if self.phase_set else -1
        self.phase_set.append(len(self.phase_set) if phase is not None else previous)

    def entries(self, length: int) -> Iterator[Visible]:
        """The first `length` entries."""
        return zip(
            self.seqs[:length],
            self.items[:length],
            self.metadata[:length],
            self.phases[:length],
            self.tokens[:length],
            strict=True,
        )

    def record(self, length: int) -> dict[str, Any]:
        """The first `length` entries as a checkpoint holds them: the items of logged facts by
        their seq, the written ones (which no fact is) whole."""
        return {
            "seqs": Span(self.seqs, length),
            "phases": Span(self.phases, length),
            "tokens": Span(self.tokens, length),
            # Derivable from the tokens and phases; written so that a restore computes nothing
            # per fact.
            "cumulative": Span(self.cumulative, length + 1),
            "phase_set": Span(self.phase_set, length),
            "ascending": Ascends(self.seqs, length),
            "written": Span(
                self.written,
                bisect.bisect_left(self.written, length),
                each=lambda at: [at, self.items[at], self.metadata[at]],
            ),
        }

    @classmethod
    def restored(cls, record: Mapping[str, Any], store: ItemStore) -> VisibleColumns:
        """The columns `record` holds, each logged fact's item read from `store` when read."""
        columns = cls()
        # Lists, not arrays: an entry the service writes has no seq, and no stored tokens.
        seqs: list[int | None] = list(record["seqs"])
        columns.seqs, columns.phases, columns.tokens = (
            seqs,
            record["phases"],
            list(record["tokens"]),
        )
        items: list[Any] = [UNREAD] * len(seqs)
        metadata: list[Any] = [UNREAD] * len(seqs)
        for at, item, meta in record["written"]:
            items[at], metadata[at] = item, meta
            columns.written.append(at)
        columns.items = lazy(items, lambda at: store.get(logged_seq(seqs[at]))[0])
        columns.metadata = lazy(metadata, lambda at: store.get(logged_seq(seqs[at]))[1])
        columns.cumulative, columns.phase_set = record["cumulative"], record["phase_set"]
        if not len(columns.cumulative) == len(seqs) + 1 == len(columns.phase_set) + 1:
            raise ValueError("a checkpoint's visible columns differ in length")
        columns.index_of = SortedIndex.of(seqs, ascending=record["ascending"])
        return columns

    def copy(self, length: int) -> VisibleColumns:
        """A new, unshared copy of the first `length` entries (items not read yet stay so)."""
        copy = VisibleColumns()
        copy.seqs = self.seqs[:length]
        copy.items = prefix(self.items, length)
        copy.metadata = prefix(self.metadata, length)
        copy.phases = self.phases[:length]
        copy.tokens = self.tokens[:length]
        copy.cumulative = self.cumulative[: length + 1]
        copy.phase_set = self.phase_set[:length]
        copy.index_of = {seq: at for seq, at in self.index_of.items() if at < length}
        copy.written = self.written[: bisect.bisect_left(self.written, length)]
        return copy


class LoggedColumns:
    """Every model-visible fact of a session's log by seq, in seq order, growing as facts are
    appended (shared like `VisibleColumns`): a fold reads those up to its `last_seq`."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.at: MutableMapping[int, int] = {}
        """Each fact's index in `order` and the columns beside it."""
        self.items: Column[Item] = []
        self.metadata: Column[dict[str, Any]] = []
        self.phases: list[str | None] = []
        self.tokens: list[int] = []
        self.internal: list[int] = []
        """The seqs of the service's own facts (`contextd.*`), in order: what the log holds
        beside the model-visible facts."""
        self.key_kinds: Column[str] = []
        self.key_ids: Column[object] = []
        self.key_seqs: Column[int] = []
        """The calls and outputs among the facts, in seq order: (type, call_id) and seq."""
        self._keyed: dict[tuple[str, object], list[int]] | None = {}
        """The seqs under each (type, call_id) of the key columns; in a restored fold, built
        when first read (few calls after a restore read it: a compaction's placeholders
        name their facts by key)."""
        self.store: ItemStore | None = None
        """Where the items of a restored fold are read from (None: every item is held)."""
        self.derived: dict[Any, Any] = {}
        """What is derived from this log across epochs (`app.domain.elision`'s base statuses),
        by what it was derived with: each reads its own prefix of the log."""
        self.claims = Claims()

    def __len__(self) -> int:
        return len(self.order)

    def add(self, entry: Visible) -> None:
        seq, item, metadata, phase, tokens = entry
        assert seq is not None
        self.at[seq] = len(self.order)
        self.order.append(seq)
        self.items.append(item)
        self.metadata.append(metadata)
        self.phases.append(phase)
        self.tokens.append(tokens or 0)
        if (key := logged_key(item)) is not None:
            self.key_kinds.append(key[0])
            self.key_ids.append(key[1])
            self.key_seqs.append(seq)
            if self._keyed is not None:
                self._keyed.setdefault(key, []).append(seq)

    def keyed(self) -> dict[tuple[str, object], list[int]]:
        """The seqs under each (type, call_id), in seq order."""
        if self._keyed is None:
            keyed: dict[tuple[str, object], list[int]] = {}
            for kind, call_id, seq in zip(self.key_kinds, self.key_ids, self.key_seqs, strict=True):
                keyed.setdefault((kind, call_id), []).append(seq)
            self._keyed = keyed
        return self._keyed

    def _keys_up_to(self, length: int) -> int:
        """How many of the key columns' entries belong to the first `length` facts (all of
        them, for all the facts: read without reading a restored key, which parses them all)."""
        if length == len(self.order):
            return len(self.key_seqs)
        return bisect.bisect_right(self.key_seqs, self.order[length - 1] if length else 0)

    def entry(self, seq: int) -> Visible:
        at = self.at[seq]
        return seq, self.items[at], self.metadata[at], self.phases[at], self.tokens[at]

    def record(self, length: int, *, last_seq: int) -> dict[str, Any]:
        """The first `length` facts and the own facts up to `last_seq`, as a checkpoint holds
        them: no item, which the log holds."""
        keys = self._keys_up_to(length)
        return {
            "key_count": keys,
            "order": Span(self.order, length),
            "phases": Span(self.phases, length),
            "tokens": Span(self.tokens, length),
            "internal": Span(self.internal, bisect.bisect_right(self.internal, last_seq)),
            # Read by few calls after a restore: parsed when first read.
            "keys": Later(
                {
                    "kinds": Span(self.key_kinds, keys),
                    "ids": Span(self.key_ids, keys),
                    "seqs": Span(self.key_seqs, keys),
                }
            ),
        }

    @classmethod
    def restored(cls, record: Mapping[str, Any], store: ItemStore) -> LoggedColumns:
        """The columns `record` holds, each item read from `store` when read."""
        columns = cls()
        order: list[int] = record["order"]
        columns.order, columns.phases, columns.tokens = order, record["phases"], record["tokens"]
        columns.at = SortedIndex(order)
        columns.store = store
        columns.items = lazy([UNREAD] * len(order), lambda at: store.get(order[at])[0])
        columns.metadata = lazy([UNREAD] * len(order), lambda at: store.get(order[at])[1])
        columns.internal = record["internal"]
        keys: Later = record["keys"]
        count = record["key_count"]
        columns.key_kinds = read_at_once(lambda: keys.value()["kinds"], count)
        columns.key_ids = read_at_once(lambda: keys.value()["ids"], count)
        columns.key_seqs = read_at_once(lambda: keys.value()["seqs"], count)
        columns._keyed = None
        return columns

    def copy(self, length: int, *, last_seq: int) -> LoggedColumns:
        """A new, unshared copy of the first `length` facts and the own facts up to `last_seq`
        (items not read yet stay so)."""
        copy = LoggedColumns()
        copy.store = self.store
        copy.order = self.order[:length]
        copy.at = {seq: at for seq, at in self.at.items() if at < length}
        copy.items = prefix(self.items, length)
        copy.metadata = prefix(self.metadata, length)
        copy.phases = self.phases[:length]
        copy.tokens = self.tokens[:length]
        keys = self._keys_up_to(length)
        copy.key_kinds, copy.key_ids = prefix(self.key_kinds, keys), prefix(self.key_ids, keys)
        copy.key_seqs = prefix(self.key_seqs, keys)
        copy._keyed = None
        copy.internal = self.internal[: bisect.bisect_right(self.internal, last_seq)]
        return copy


class LoggedUpTo(Mapping[int, Visible]):
    """The model-visible facts of a log with a seq up to `last_seq`, in seq order."""

    def __init__(self, logged: LoggedColumns, length: int) -> None:
        self._logged, self._length = logged, length

    def __getitem__(self, seq: int) -> Visible:
        if seq not in self:
            raise KeyError(seq)
        return self._logged.entry(seq)

    def __contains__(self, seq: object) -> bool:
        at = self._logged.at.get(seq) if isinstance(seq, int) else None
        return at is not None and at < self._length

    def tokens_of(self, seq: int) -> int:
        """The stored tokens of fact `seq` (without reading its item)."""
        if seq not in self:
            raise KeyError(seq)
        return self._logged.tokens[self._logged.at[seq]]

    def item_of(self, seq: int) -> Item:
        """The item of fact `seq`."""
        if seq not in self:
            raise KeyError(seq)
        return self._logged.items[self._logged.at[seq]]

    def read_ahead(self, start: int, stop: int) -> None:
        """Reads, in large reads, the items of the facts at `start..stop` in `order` that were
        not read yet: for a caller about to read them all."""
        logged = self._logged
        if logged.store is not None:
            stop = min(stop, self._length)
            items = logged.items
            logged.store.read_ahead(
                [logged.order[at] for at in range(start, stop) if held(items, at) is UNREAD]
            )

    def __iter__(self) -> Iterator[int]:
        return iter(self._logged.order[: self._length])

    def __len__(self) -> int:
        return self._length

    @property
    def order(self) -> Sequence[int]:
        """The seqs, in order, read in place."""
        return Prefix(self._logged.order, self._length)

    @property
    def last(self) -> int:
        """The seq of the newest fact read (0: none)."""
        return self._logged.order[self._length - 1] if self._length else 0

    def keyed(self, key: tuple[str, object]) -> list[int]:
        """The seqs, in order, of the calls or outputs under `key` ((type, call_id))."""
        last = self.last
        return [seq for seq in self._logged.keyed().get(key, ()) if seq <= last]

    @property
    def derived(self) -> dict[Any, Any]:
        """What is derived from this log across epochs (see `LoggedColumns.derived`)."""
        return self._logged.derived

    def internal(self, first: int, last: int) -> Sequence[int]:
        """The seqs of the service's own facts from `first` to `last` (both included, `last` at
        most the fold's own last seq), in order."""
        internal = self._logged.internal
        return internal[bisect.bisect_left(internal, first) : bisect.bisect_right(internal, last)]
