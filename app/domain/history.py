"""The active history as the core receives it, and where it may be cut.

A history is cut at a position p by keeping `items[p:]` (assembly) or by dropping or recording
`items[:p]` (compaction). `history_cuts` gives every position where that is allowed:

- Every call with a non-empty string call_id before p has its output before p, so a call never
  loses its output, nor an output its call. An output marked `"execution": "server"` answers
  nothing: the service did not run it, and pairing does not count it (see `normalize`).
- The item before p is not a reasoning item that leads into model output (a call, another
  reasoning item or an assistant message): providers refuse a reasoning item separated from the
  item it produced, and a call separated from its reasoning. A reasoning item followed by
  anything else (a user message, the end of the history) may be cut after.

0 is always a cut. So a history that passes `find_pairing_violations` still passes it on either
side of any cut.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

from app.domain.items import CALL_TYPES, Item, item_type
from app.domain.normalize import CallKey, answer_key, call_key

__all__ = ["EntryItems", "HistoryEntry", "cuts_from_end", "history_cuts"]

_LED_BY_REASONING = CALL_TYPES | {"reasoning"}
"""Item types a reasoning item right before them produced (assistant messages too)."""


class HistoryEntry(NamedTuple):
    """One item of the active history, with what the caller knows about it.

    A named tuple rather than a dataclass: one is built per turn, per call, and assembly reads
    `item` and `tokens` on its hot path.
    """

    seq: int | None
    """The fact seq the item comes from; None for items the service wrote."""
    item: Item
    verbatim: bool = True
    """True iff `item` is exactly the stored fact `seq`."""
    tokens: int | None = None
    """Its visible text's token count, when the caller has it already (else the core counts)."""
    id: str = ""
    """The name an assembly plan gives it."""


class EntryItems(Sequence[Item]):
    """The items of a history's entries, read through: built in O(1), each item read only
    when asked for."""

    def __init__(self, entries: Sequence[HistoryEntry]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return [entry.item for entry in self._entries[index]]
        return self._entries[index].item


def history_cuts(items: Sequence[Item]) -> tuple[int, ...]:
    """The positions, in order, at which `items` may be cut; see the module docstring."""
    cuts = [0]
    waiting: set[CallKey] = set()
    for position, item in enumerate(items):
        if (key := call_key(item)) is not None:
            waiting.add(key)
        elif (key := answer_key(item)) is not None:
            waiting.discard(key)
        if waiting:
            continue
        if position + 1 < len(items) and _leads(item, items[position + 1]):
            continue
        cuts.append(position + 1)
    return tuple(cuts)


def cuts_from_end(items: Sequence[Item]) -> Iterator[int]:
    """`history_cuts(items)` from the last to the first, found by reading `items` from the end
    only as far as the caller goes on asking: what an assembly that keeps the newest of a long
    history reads of it.

    Only for a paired history (`find_pairing_violations` finds nothing, as after
    normalization), where a position lies between a call and its output exactly when an output
    at or after it answers a call before it.
    """
    answered_later: set[CallKey] = set()
    following: Item | None = None
    for position in range(len(items), 0, -1):
        if not answered_later and (following is None or not _leads(items[position - 1], following)):
            yield position
        item = items[position - 1]
        if (key := answer_key(item)) is not None:
            answered_later.add(key)
        elif (key := call_key(item)) is not None:
            answered_later.discard(key)
        following = item
    yield 0


def _leads(item: Item, following: Item) -> bool:
    """Whether `item` is a reasoning item that led to `following`, which may not be parted."""
    if item_type(item) != "reasoning":
        return False
    following_kind = item_type(following)
    return following_kind in _LED_BY_REASONING or (
        following_kind == "message" and following.get("role") == "assistant"
    )
