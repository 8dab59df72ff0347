"""The settled columns of a session view (`app.domain.session_view`): the normalized items no
item appended later can change, read into typed columns once, shared by every view that reads
a prefix of them, and written to a checkpoint and restored from one.

Invariant: `SettledColumns.restored(columns.record(lengths, ...))` reads, over the first
`lengths`, the same rows, reports and keys as `columns` (pinned by the checkpoint's tests);
its items that are their facts' items unchanged are read from the log when first read.
"""

from __future__ import annotations

import bisect
import hashlib
from array import array
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import astuple
from typing import Any

from app.domain.column_codec import Ascends, Later, Span
from app.domain.facts.stored_items import (
    UNREAD,
    Column,
    SortedIndex,
    lazy,
    logged_seq,
    prefix,
    read_at_once,
)
from app.domain.growing import Claims
from app.domain.history import HistoryEntry
from app.domain.items import Item
from app.domain.normalize import (
    CallKey,
    DeduplicatedOutput,
    ExcludedItem,
    Family,
    ReorderedOutput,
    StrippedMedia,
    TruncatedOutput,
)

__all__ = ["SettledColumns"]


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
        self.row_of: MutableMapping[int, int] = {}
        """Each settled input's row (its normalized position); none for an input
        normalization left out."""
        self.excluded_at: dict[int, str] = {}
        """Why normalization left out each settled input it excluded."""
        self.owned_families: Column[Family] = []
        self.owned_ids: Column[str] = []
        self.owned_calls: Column[int] = []
        """Each settled key (family, call_id) with its call's input index, in the order they
        settled: a key is settled for a view whose boundary lies after its call."""
        self.owned_digests: array[int] = array("i")
        """Each settled key's `key_digest`, beside it."""
        self._owned: dict[CallKey, int] = {}
        """The keys settled since the columns were restored (all of them, if they were not)."""
        self._restored_owned = 0
        self._restored_digests: frozenset[int] | None = None
        """The digests of the keys a checkpoint held, gathered when first asked: most keys
        asked about are new, and a set of digests read in place tells so without parsing the
        keys."""
        self._restored_index: dict[CallKey, int] | None = {}
        """The keys a checkpoint held, indexed when first read: a key asked about that a
        checkpoint held is rare (an output whose call is not in the open tail)."""
        self.whole_rows: list[int] = []
        """The rows whose item is not their fact's item as it is (a truncated output, an item
        the service wrote): a checkpoint holds these items whole."""
        self.whole: Column[Item] = []
        self.claims = Claims()

    def own(self, key: CallKey, call: int) -> None:
        """Settles `key`, owned by the call at input index `call`."""
        self.owned_families.append(key[0])
        self.owned_ids.append(key[1])
        self.owned_calls.append(call)
        self.owned_digests.append(key_digest(key))
        self._owned[key] = call

    def call_of(self, key: object) -> int | None:
        """The input index of the settled call that owns `key`, if one does."""
        call: int | None = self._owned.get(key)  # type: ignore[call-overload]
        if call is None and self._restored_owned:
            restored = self._restored_owned
            if self._restored_digests is None:
                self._restored_digests = frozenset(self.owned_digests[:restored])
            if key_digest(key) not in self._restored_digests:
                return None
            if self._restored_index is None:
                keys = zip(self.owned_families[:restored], self.owned_ids[:restored], strict=True)
                self._restored_index = dict(zip(keys, self.owned_calls[:restored], strict=True))
            call = self._restored_index.get(key)  # type: ignore[call-overload]
        return call

    def lengths(self) -> tuple[int, ...]:
        return (
            len(self.items),
            len(self.excluded),
            len(self.reordered),
            len(self.deduplicated),
            len(self.stripped),
            len(self.truncated),
            len(self.offered),
            len(self.owned_calls),
        )

    def copy(self, lengths: tuple[int, ...], *, boundary: int) -> SettledColumns:
        """A new, unshared copy of the first `lengths` of these columns."""
        rows, excluded, reordered, deduplicated, stripped, truncated, offered, owned = lengths
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
        restored = min(self._restored_owned, owned)
        copy.owned_families = prefix(self.owned_families, owned)
        copy.owned_ids = prefix(self.owned_ids, owned)
        copy.owned_calls = prefix(self.owned_calls, owned)
        copy.owned_digests = self.owned_digests[:owned]
        since = zip(
            self.owned_families[restored:owned], self.owned_ids[restored:owned], strict=True
        )
        copy._owned = dict(zip(since, self.owned_calls[restored:owned], strict=True))
        copy._restored_owned, copy._restored_index = restored, None
        whole = bisect.bisect_left(self.whole_rows, rows)
        copy.whole_rows, copy.whole = self.whole_rows[:whole], prefix(self.whole, whole)
        copy.row_of = {source: row for source, row in self.row_of.items() if row < rows}
        copy.excluded_at = {
            index: reason for index, reason in self.excluded_at.items() if index < boundary
        }
        return copy

    def record(self, lengths: tuple[int, ...]) -> dict[str, Any]:
        """The first `lengths` of these columns as a checkpoint holds them: the items that are
        their facts' items as they are by their seq (the log holds them), the others whole."""
        rows, excluded, reordered, deduplicated, stripped, truncated, offered, owned = lengths
        whole = bisect.bisect_left(self.whole_rows, rows)
        return {
            "whole_rows": Span(self.whole_rows, whole),
            "whole": Later(Span(self.whole, whole)),
            "sources": Span(self.sources, rows),
            "sources_ascending": Ascends(self.sources, rows),
            "seqs": Span(self.seqs, rows),
            "tokens": Span(self.tokens, rows),
            "fragments": Span(self.fragments, rows),
            # Derivable from the tokens and fragments; written so that a restore computes
            # nothing per row.
            "cumulative": Span(self.cumulative, rows + 1),
            "offered": Span(self.offered, offered),
            "offered_cumulative": Span(self.offered_cumulative, offered + 1),
            "excluded": Span(self.excluded, excluded, each=_fields),
            "reordered": Span(self.reordered, reordered, each=_fields),
            "deduplicated": Span(self.deduplicated, deduplicated, each=_fields),
            "stripped": Span(self.stripped, stripped, each=_fields),
            "truncated": Span(self.truncated, truncated, each=_fields),
            # Read by few calls after a restore: parsed when first read.
            "owned_count": owned,
            "owned_digests": Span(self.owned_digests, owned),
            "owned": Later(
                {
                    "families": Span(self.owned_families, owned),
                    "ids": Span(self.owned_ids, owned),
                    "calls": Span(self.owned_calls, owned),
                }
            ),
        }

    @classmethod
    def restored(
        cls, record: Mapping[str, Any], fact_item: Callable[[int], Item]
    ) -> SettledColumns:
        """The columns `record` holds (`record`), an unchanged item read by `fact_item(seq)`
        when first read."""
        settled = cls()
        # Lists, not arrays: a row the service wrote has no seq (a synthesized one, no source).
        seqs: list[int | None] = list(record["seqs"])
        tokens: list[int] = record["tokens"]
        fragments: list[bool] = record["fragments"]
        settled.sources, settled.seqs, settled.tokens = list(record["sources"]), seqs, tokens
        settled.fragments = fragments
        settled.whole_rows = record["whole_rows"]
        later: Later = record["whole"]
        settled.whole = read_at_once(later.value, len(settled.whole_rows))
        whole_at = {row: at for at, row in enumerate(settled.whole_rows)}
        whole = settled.whole

        def item(row: int) -> Item:
            at = whole_at.get(row)
            return fact_item(logged_seq(seqs[row])) if at is None else whole[at]

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
        settled.row_of = SortedIndex.of(settled.sources, ascending=record["sources_ascending"])
        settled.excluded_at = {entry.index: entry.explained for entry in settled.excluded}
        owned: Later = record["owned"]
        count = record["owned_count"]
        settled.owned_families = read_at_once(lambda: owned.value()["families"], count)
        settled.owned_ids = read_at_once(lambda: owned.value()["ids"], count)
        settled.owned_calls = read_at_once(lambda: owned.value()["calls"], count)
        settled.owned_digests = array("i", record["owned_digests"])
        if len(settled.owned_digests) != count:
            raise ValueError("a checkpoint's settled keys differ in length")
        settled._restored_owned, settled._restored_index = count, None
        return settled


def _fields(entry: Any) -> list[Any]:
    """A report entry (a dataclass) as a checkpoint holds it."""
    return list(astuple(entry))


def key_digest(key: object) -> int:
    """A 32-bit digest of a settled key, the same in every process (a string's `hash` is not):
    a checkpoint holds the keys' digests, so that telling a key is not among them reads no key.
    Equal keys have equal digests; two keys may share one."""
    if isinstance(key, tuple) and all(isinstance(part, str) for part in key):
        data = "\0".join(key).encode("utf-8", "surrogatepass")
    else:
        data = repr(key).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=4).digest(), "little", signed=True)
