"""The settled columns of a session view (`app.domain.session_view`): the normalized items no
item appended later can change, read into typed columns once, shared by every view that reads
a prefix of them, and written to a checkpoint and restored from one.

Invariant: `SettledColumns.restored(columns.record(lengths, ...))` reads, over the first
`lengths`, the same rows, reports and keys as `columns` (pinned by the checkpoint's tests);
its items that are their facts' items unchanged are read from the log when first read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import astuple
from typing import Any

from app.domain.column_codec import Later
from app.domain.facts.stored_items import UNREAD, Column, held, lazy, prefix
from app.domain.growing import Claims
from app.domain.history import HistoryEntry
from app.domain.items import Item
from app.domain.normalize import (
    CallKey,
    DeduplicatedOutput,
    ExcludedItem,
    ReorderedOutput,
    StrippedMedia,
    TruncatedOutput,
)

__all__ = ["SettledColumns"]


def _logged(seq: int | None) -> int:
    """The seq of a row whose item is read from the log: every such row has one."""
    assert seq is not None
    return seq


class _OwnedRows:
    """The keys a checkpoint's settled calls own, kept as its rows and indexed when first
    read."""

    def __init__(self, rows: Later | None = None) -> None:
        self._rows = rows
        self._index: dict[CallKey, int] | None = None if rows else {}

    def index(self) -> dict[CallKey, int]:
        if self._index is None:
            assert self._rows is not None
            rows = self._rows.value()
            keys = zip(rows["families"], rows["ids"], strict=True)
            self._index = dict(zip(keys, rows["calls"], strict=True))
        return self._index

    @staticmethod
    def record(owned: Iterable[tuple[CallKey, int]]) -> Later:
        rows = list(owned)
        return Later(
            {
                "families": [key[0] for key, _ in rows],
                "ids": [key[1] for key, _ in rows],
                "calls": [call for _, call in rows],
            }
        )


class SettledColumns:
    """The settled columns, shared by every view that reads a prefix of them. Appended to only
    by the view that claimed its current lengths (`app.domain.growing.grown`)."""

    def __init__(self) -> None:
        self.items: Column[Item] = []
        self.sources: list[int | None] = []
        self.seqs: list[int | None] = []
        self.tokens: list[int] = []
        self.fragments: list[bool] = []
        self.cumulative: list[int] = [0]
        """`cumulative[n]`: the tokens of the first n items."""
        self.offered: list[int] = []
        """The normalized positions assembly offers as history: all but the fragments."""
        self.offered_cumulative: list[int] = [0]
        """`offered_cumulative[k]`: the tokens of the first k offered items."""
        self.entries: Column[HistoryEntry] = []
        """The offered items as assembly input (`HistoryView.offered_history`)."""
        self.excluded: list[ExcludedItem] = []
        self.reordered: list[ReorderedOutput] = []
        self.deduplicated: list[DeduplicatedOutput] = []
        self.stripped: list[StrippedMedia] = []
        self.truncated: list[TruncatedOutput] = []
        self.row_of: dict[int, int] = {}
        """Each settled input's row (its normalized position); none for an input
        normalization left out."""
        self.excluded_at: dict[int, str] = {}
        """Why normalization left out each settled input it excluded."""
        self.owned: dict[CallKey, int] = {}
        self.restored_owned = _OwnedRows()
        """The same of the calls a checkpoint held (`owned` holds those settled since), indexed
        when first read: an output whose call is not in the open tail is rare."""
        """Each settled key's call, by input index: a key is settled for a view whose boundary
        lies after its call."""
        self.claims = Claims()

    def call_of(self, key: object) -> int | None:
        """The input index of the settled call that owns `key`, if one does."""
        call: int | None = self.owned.get(key)  # type: ignore[call-overload]
        if call is None:
            call = self.restored_owned.index().get(key)  # type: ignore[call-overload]
        return call

    def _all_owned(self) -> Iterator[tuple[CallKey, int]]:
        yield from self.restored_owned.index().items()
        yield from self.owned.items()

    def lengths(self) -> tuple[int, ...]:
        return (
            len(self.items),
            len(self.excluded),
            len(self.reordered),
            len(self.deduplicated),
            len(self.stripped),
            len(self.truncated),
            len(self.offered),
        )

    def copy(self, lengths: tuple[int, ...], *, boundary: int) -> SettledColumns:
        """A new, unshared copy of the first `lengths` of these columns."""
        rows, excluded, reordered, deduplicated, stripped, truncated, offered = lengths
        copy = SettledColumns()
        copy.items = prefix(self.items, rows)
        copy.sources = self.sources[:rows]
        copy.seqs = self.seqs[:rows]
        copy.tokens = self.tokens[:rows]
        copy.fragments = self.fragments[:rows]
        copy.cumulative = self.cumulative[: rows + 1]
        copy.offered = self.offered[:offered]
        copy.offered_cumulative = self.offered_cumulative[: offered + 1]
        copy.entries = prefix(self.entries, offered)
        copy.excluded = self.excluded[:excluded]
        copy.reordered = self.reordered[:reordered]
        copy.deduplicated = self.deduplicated[:deduplicated]
        copy.stripped = self.stripped[:stripped]
        copy.truncated = self.truncated[:truncated]
        copy.owned = {key: call for key, call in self._all_owned() if call < boundary}
        copy.row_of = {source: row for source, row in self.row_of.items() if row < rows}
        copy.excluded_at = {
            index: reason for index, reason in self.excluded_at.items() if index < boundary
        }
        return copy

    def record(
        self, lengths: tuple[int, ...], *, boundary: int, active_items: Sequence[Item]
    ) -> dict[str, Any]:
        """The first `lengths` of these columns (settled before input `boundary`, over the
        active items `active_items`) as a checkpoint holds them: an item that is its fact's
        item unchanged by its seq (the log holds it), any other whole."""
        rows, excluded, reordered, deduplicated, stripped, truncated, offered = lengths
        whole_rows, whole = [], []
        for row in range(rows):
            own, source = held(self.items, row), self.sources[row]
            verbatim = own is UNREAD or (source is not None and own is held(active_items, source))
            if not verbatim or self.seqs[row] is None:
                whole_rows.append(row)
                whole.append(own)
        return {
            "whole_rows": whole_rows,
            "whole": Later(whole),
            "sources": self.sources[:rows],
            "seqs": self.seqs[:rows],
            "tokens": self.tokens[:rows],
            "fragments": self.fragments[:rows],
            "cumulative": self.cumulative[: rows + 1],
            "offered": self.offered[:offered],
            "offered_cumulative": self.offered_cumulative[: offered + 1],
            "excluded": [list(astuple(entry)) for entry in self.excluded[:excluded]],
            "reordered": [list(astuple(entry)) for entry in self.reordered[:reordered]],
            "deduplicated": [list(astuple(e)) for e in self.deduplicated[:deduplicated]],
            "stripped": [list(astuple(entry)) for entry in self.stripped[:stripped]],
            "truncated": [list(astuple(entry)) for entry in self.truncated[:truncated]],
            "owned": _OwnedRows.record(
                (key, call) for key, call in self._all_owned() if call < boundary
            ),
        }

    @classmethod
    def restored(
        cls, record: Mapping[str, Any], fact_item: Callable[[int], Item]
    ) -> SettledColumns:
        """The columns `record` holds (`record`), an unchanged item read by `fact_item(seq)`
        when first read."""
        settled = cls()
        seqs: list[int | None] = record["seqs"]
        tokens: list[int] = record["tokens"]
        fragments: list[bool] = record["fragments"]
        settled.sources, settled.seqs, settled.tokens = record["sources"], seqs, tokens
        settled.fragments = fragments
        whole_at = {row: at for at, row in enumerate(record["whole_rows"])}
        whole: Later = record["whole"]

        def item(row: int) -> Item:
            at = whole_at.get(row)
            return fact_item(_logged(seqs[row])) if at is None else whole.value()[at]

        settled.items = lazy([UNREAD] * len(seqs), item)
        settled.cumulative = record["cumulative"]
        offered: list[int] = record["offered"]
        settled.offered, settled.offered_cumulative = offered, record["offered_cumulative"]
        if not (
            len(settled.cumulative) == len(seqs) + 1 == len(tokens) + 1 == len(fragments) + 1
            and len(settled.offered_cumulative) == len(offered) + 1
        ):
            raise ValueError("a checkpoint's settled columns differ in length")
        items = settled.items
        settled.entries = lazy(
            [UNREAD] * len(offered),
            lambda k: HistoryEntry(
                seqs[offered[k]], items[offered[k]], True, tokens[offered[k]], f"history:{k}"
            ),
        )
        settled.excluded = [ExcludedItem(*entry) for entry in record["excluded"]]
        settled.reordered = [ReorderedOutput(*entry) for entry in record["reordered"]]
        settled.deduplicated = [DeduplicatedOutput(*entry) for entry in record["deduplicated"]]
        settled.stripped = [StrippedMedia(*entry) for entry in record["stripped"]]
        settled.truncated = [TruncatedOutput(*entry) for entry in record["truncated"]]
        settled.row_of = dict(zip(settled.sources, range(len(seqs)), strict=True))  # type: ignore[arg-type]
        settled.row_of.pop(None, None)  # type: ignore[call-overload]
        settled.excluded_at = {entry.index: entry.explained for entry in settled.excluded}
        settled.restored_owned = _OwnedRows(record["owned"])
        return settled
