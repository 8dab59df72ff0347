"""Columns whose values are read only when first read: a fold restored from a checkpoint
(`app.domain.checkpoint`) knows every fact's seq, tokens and phase, but reads a fact's item
from the log only when something reads that item, so that a worker new to a session reads what
its first call shows, not the whole log.

Invariants:

- `ItemStore.get(seq)` returns the same objects for a seq every time, whichever thread asks:
  normalization tells an unchanged item by identity, so the fold's column and a view's column
  that both hold fact `seq` must hold one object.
- A `LazyColumn` is a growing column (`app.domain.growing`): reading a value that was not read
  yet stores what it resolved to, which is what that index always stood for; no index ever
  changes what it stands for.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from typing import Any, Final, Generic, TypeVar, overload

from app.domain.items import Item

__all__ = [
    "UNREAD",
    "Column",
    "ItemStore",
    "LazyColumn",
    "ReadItems",
    "SortedIndex",
    "StoredFact",
    "held",
    "lazy",
    "logged_seq",
    "prefix",
    "read_at_once",
]

T = TypeVar("T")

StoredFact = tuple[Item, dict[str, Any]]
"""A fact's item and its append metadata (its provenance), as the log holds them."""

ReadItems = Callable[[Sequence[int]], Mapping[int, StoredFact]]
"""Reads the facts of one session's log by seq (the storage shell's)."""


class _Unread:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD: Final = _Unread()
"""A column's value that is read when first read."""

READ_CHUNK = 1_024
"""Facts read at once when one is missed: an assembly reads its window from the newest end
back, a few hundred items (about 600 in a 128k window of the public runs' tool calls), so one
read serves a call."""

READ_AHEAD_CHUNK = 10_000
"""Facts read at once by a reader that says it will read them all (`ItemStore.read_ahead`)."""


def logged_seq(seq: int | None) -> int:
    """The seq of an entry or row whose item is read from the log: every such one has one
    (the service's own items, which have none, are held whole)."""
    assert seq is not None
    return seq


class ItemStore:
    """The facts of one session's log that a restored fold holds by reference, read in chunks
    of neighbours in `order` (the logged seqs, ascending) and kept once read. Reads take
    `lock` (the shell gives a thread lock: requests of one session read it from their threads)."""

    def __init__(
        self,
        read: ReadItems,
        order: Sequence[int],
        *,
        lock: ContextManager[object] | None = None,
    ) -> None:
        self._read = read
        self._order = order
        self._facts: dict[int, StoredFact] = {}
        self._lock = lock or nullcontext()
        self._last_miss: int | None = None

    def get(self, seq: int) -> StoredFact:
        found = self._facts.get(seq)
        if found is not None:
            return found
        with self._lock:
            found = self._facts.get(seq)
            if found is None:
                self._fill(seq)
                found = self._facts[seq]
        return found

    def read_ahead(self, seqs: Sequence[int]) -> None:
        """Reads those of `seqs` not read yet, in large reads: for a caller about to read them
        all (the grader indexing the log)."""
        with self._lock:
            missing = [seq for seq in seqs if seq not in self._facts]
            for start in range(0, len(missing), READ_AHEAD_CHUNK):
                for seq, fact in self._read(missing[start : start + READ_AHEAD_CHUNK]).items():
                    self._facts.setdefault(seq, fact)

    def _fill(self, seq: int) -> None:
        """Reads `seq` and its unread neighbours: those before it when reads go backwards (an
        assembly's window, newest first), those after it otherwise."""
        order = self._order
        at = bisect.bisect_left(order, seq)
        backwards = self._last_miss is None or seq < self._last_miss
        self._last_miss = seq
        first = max(0, at - READ_CHUNK + 1) if backwards else at
        span = order[first : first + READ_CHUNK]
        wanted = [s for s in span if s not in self._facts]
        if seq not in wanted:
            wanted.append(seq)
        read = self._read(wanted)
        if seq not in read:
            raise LookupError(f"the log has no fact {seq} to read")
        for s, fact in read.items():
            self._facts.setdefault(s, fact)


class LazyColumn(Sequence[T], Generic[T]):
    """A growing column some of whose values are `UNREAD` until read, each then resolved by
    `resolve(index)` and kept."""

    __slots__ = ("_read_all", "_resolve", "_values")

    def __init__(
        self,
        values: list[Any],
        resolve: Callable[[int], T],
        *,
        read_all: Callable[[], Sequence[T]] | None = None,
    ) -> None:
        self._values, self._resolve = values, resolve
        self._read_all = read_all
        """Reads every value at once (those of the first indexes it returns): a column read
        whole from one parse resolves all its values the first time one is read."""

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            part = self._values[index]
            if UNREAD in part and self._read_all is not None:
                self._fill()
                part = self._values[index]
            if UNREAD in part:
                return [self[at] for at in range(*index.indices(len(self._values)))]
            return part
        value = self._values[index]
        if value is UNREAD and self._read_all is not None:
            self._fill()
            value = self._values[index]
        if value is UNREAD:
            if index < 0:
                index += len(self._values)
            value = self._values[index] = self._resolve(index)
        return value  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[T]:
        values = self._values
        if self._read_all is not None and UNREAD in values:
            self._fill()
        if UNREAD not in values:
            return iter(values)
        return (self[index] for index in range(len(values)))

    def _fill(self) -> None:
        assert self._read_all is not None
        every, self._read_all = self._read_all(), None
        count = min(len(every), len(self._values))
        self._values[:count] = every[:count]

    def append(self, value: T) -> None:
        self._values.append(value)

    def prefix(self, length: int) -> LazyColumn[T]:
        """A column of its own holding the first `length` values, read as this one is."""
        return LazyColumn(self._values[:length], self._resolve, read_all=self._read_all)

    def raw(self, index: int) -> T | _Unread:
        """The value at `index` as held: `UNREAD` when it was not read yet."""
        return self._values[index]  # type: ignore[no-any-return]


Column = list[T] | LazyColumn[T]
"""A growing column: a list, or one whose values are read when first read."""


def prefix(column: Column[T], length: int) -> Column[T]:
    """An unshared copy of the first `length` values of `column`, read as it is."""
    return column.prefix(length) if isinstance(column, LazyColumn) else column[:length]


def held(column: Sequence[T], index: int) -> T | _Unread:
    """`column[index]` as held, without reading it: `UNREAD` where a lazy column has not read
    it yet."""
    return column.raw(index) if isinstance(column, LazyColumn) else column[index]


def lazy(values: list[Any], resolve: Callable[[int], T]) -> LazyColumn[T]:
    """A column of `values`, each `UNREAD` one resolved by `resolve(index)` when first read."""
    return LazyColumn(values, resolve)


def read_at_once(read: Callable[[], Sequence[T]], count: int) -> LazyColumn[T]:
    """A column of `count` values, all read by `read()` (a sequence of at least `count`) when
    the first is read: a column parsed whole, whose readers mostly read it whole (an index
    built from it)."""

    def unresolvable(index: int) -> T:
        raise IndexError(f"a column read at once has no value at {index}")

    return LazyColumn([UNREAD] * count, unresolvable, read_all=read)


class SortedIndex(MutableMapping[int, int]):
    """Each key's position in a column of keys restored in ascending order (read by bisection,
    so restoring the index costs nothing per key), and the entries set since, which take
    precedence, in a dict."""

    __slots__ = ("_added", "_count", "_keys")

    def __init__(self, keys: Sequence[int]) -> None:
        self._keys, self._count = keys, len(keys)
        self._added: dict[int, int] = {}

    @classmethod
    def of(cls, keys: Sequence[int | None], *, ascending: bool) -> MutableMapping[int, int]:
        """The index of `keys` (the last position where one repeats, as a dict gives it): this
        kind where they strictly ascend (`ascending`, as `column_codec.Ascends` found when they
        were written), else a dict."""
        if ascending:
            return cls(keys)  # type: ignore[arg-type]
        return {key: at for at, key in enumerate(keys) if key is not None}

    def _restored(self, key: object) -> int | None:
        if type(key) is not int:
            return None
        at = bisect.bisect_left(self._keys, key, hi=self._count)
        return at if at < self._count and self._keys[at] == key else None

    def __getitem__(self, key: int) -> int:
        found = self._added.get(key)
        if found is None:
            found = self._restored(key)
            if found is None:
                raise KeyError(key)
        return found

    def get(self, key: int, default: None = None) -> int | None:  # type: ignore[override]
        found = self._added.get(key)
        return self._restored(key) if found is None else found

    def __contains__(self, key: object) -> bool:
        return key in self._added or self._restored(key) is not None

    def __setitem__(self, key: int, value: int) -> None:
        self._added[key] = value

    def __delitem__(self, key: int) -> None:
        raise TypeError("a sorted index only grows")

    def __iter__(self) -> Iterator[int]:
        yield from (key for key in self._keys[: self._count] if key not in self._added)
        yield from self._added

    def __len__(self) -> int:
        return self._count + sum(1 for key in self._added if self._restored(key) is None)
