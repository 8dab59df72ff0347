"""The settled columns of a session view (`app.domain.session_view`): the normalized items no
item appended later can change, read into typed columns once, shared by every view that reads
a prefix of them, and written to a checkpoint and restored from one.

Invariant: `SettledColumns.restored(columns.record(lengths, ...))` reads, over the first
`lengths`, the same rows, reports and keys as `columns` (pinned by the checkpoint's tests);
its items that are their facts' items unchanged are read from the log when first read.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import astuple
from typing import Any

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
        """Each settled key's call, by input index: a key is settled for a view whose boundary
        lies after its call."""
        self.claims = Claims()

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
        copy.owned = {key: call for key, call in self.owned.items() if call < boundary}
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
        rows, excluded, reordered, deduplicated, stripped, truncated, _ = lengths
        items: list[Any] = []
        for row in range(rows):
            own, source = held(self.items, row), self.sources[row]
            verbatim = own is UNREAD or (source is not None and own is held(active_items, source))
            items.append(None if verbatim and self.seqs[row] is not None else [own])
        return {
            "items": items,
            "sources": self.sources[:rows],
            "seqs": self.seqs[:rows],
            "tokens": self.tokens[:rows],
            "fragments": self.fragments[:rows],
            "excluded": [list(astuple(entry)) for entry in self.excluded[:excluded]],
            "reordered": [list(astuple(entry)) for entry in self.reordered[:reordered]],
            "deduplicated": [list(astuple(e)) for e in self.deduplicated[:deduplicated]],
            "stripped": [list(astuple(entry)) for entry in self.stripped[:stripped]],
            "truncated": [list(astuple(entry)) for entry in self.truncated[:truncated]],
            "owned": [[*key, call] for key, call in self.owned.items() if call < boundary],
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
        values = [UNREAD if whole is None else whole[0] for whole in record["items"]]
        settled.items = lazy(values, lambda row: fact_item(_logged(seqs[row])))
        settled.cumulative = [0, *itertools.accumulate(tokens)]
        offered = [row for row, fragment in enumerate(fragments) if not fragment]
        settled.offered = offered
        settled.offered_cumulative = [0, *itertools.accumulate(tokens[row] for row in offered)]
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
        settled.row_of = {
            source: row for row, source in enumerate(settled.sources) if source is not None
        }
        settled.excluded_at = {entry.index: entry.explained for entry in settled.excluded}
        settled.owned = {(family, call_id): call for family, call_id, call in record["owned"]}
        return settled
