"""Columns that only grow, shared by every snapshot that reads a prefix of them.

A session's fold and its views advance by the facts appended since, on every call; copying
their columns each time would cost what the log holds. Instead a snapshot records how much of
each shared list it has read, and reads only that. An advance appends to the shared lists in
place when it is the first to extend them from their current lengths, and copies the prefix it
read otherwise, so that two advances never write the same lists.

Invariants:

- A list is only ever appended to, never changed at an index it already holds: a snapshot's
  prefix reads the same values forever.
- `Claims.claim(lengths)` is true for exactly one caller per `lengths`, and only while the
  lists are at `lengths`: `dict.setdefault` is atomic under the GIL, so two threads advancing
  the same snapshot at once cannot both append.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, overload

__all__ = ["Claims", "Prefix", "grown"]

T = TypeVar("T")


class Claims:
    """Who may append to a set of shared lists next (see the module docstring)."""

    def __init__(self) -> None:
        self._claims: dict[Hashable, object] = {}

    def claim(self, lengths: Hashable, current: Hashable) -> bool:
        """Whether the caller, which read the lists up to `lengths`, may append to them, whose
        lengths are now `current`: the first caller at the lists' current lengths may."""
        token = object()
        return self._claims.setdefault(lengths, token) is token and lengths == current

    def release(self, lengths: Hashable) -> None:
        """Ends a claim once its appends are done: the lengths it was made at are past."""
        self._claims.pop(lengths, None)


class Shared(Protocol):
    """Lists that only grow, with the claims that say who may append to them next."""

    @property
    def claims(self) -> Claims: ...


S = TypeVar("S", bound=Shared)


def grown(
    store: S, *, read: Hashable, now: Hashable, copy: Callable[[], S], grow: Callable[[S], None]
) -> S:
    """`store`, which the caller read up to `read` (its lengths), grown by `grow`: in place
    when the caller is the first to extend it from its lengths `now`, else a copy of what the
    caller read (`copy`), so that two growers never write the same lists."""
    claimed = store.claims.claim(read, now)
    target = store if claimed else copy()
    try:
        grow(target)
    finally:
        if claimed:
            store.claims.release(read)
    return target


class Prefix(Sequence[T]):
    """The first `length` values of a shared list, then `tail`'s: read in place, in O(1)."""

    __slots__ = ("_length", "_shared", "_tail")

    def __init__(self, shared: Sequence[T], length: int, tail: Sequence[T] = ()) -> None:
        self._shared, self._length, self._tail = shared, length, tail

    def __len__(self) -> int:
        return self._length + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        # The hot path first: an assembly reads thousands of items one index at a time.
        if type(index) is int and 0 <= index < self._length:
            return self._shared[index]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and stop <= self._length:
                return self._shared[start:stop]
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if index < 0 or index >= len(self):
            raise IndexError(index)
        if index < self._length:
            return self._shared[index]
        return self._tail[index - self._length]

    def __iter__(self) -> Iterator[T]:
        shared = self._shared
        for index in range(self._length):
            yield shared[index]
        yield from self._tail

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]
