"""What a context leaves out of the session's history, and the notice that names it.

`HistoryElisions.of` lists every fact of the session's history (the model-visible facts since the
last reset, less retracted ones and world-state fragments, which the world state shows) that a
context shows reduced or not at all, as seq ranges of one form and one reason. Invariants:

- Deterministic: the same log and the same context give the same list, in seq order.
- Every listed seq is a fact of the log, so recall can read it; a fact shown verbatim is never
  listed. A range merges consecutive listed facts of one form and reason (a fact shown between
  them ends it; facts that are not part of the history, such as goal versions, do not).
- `tokens_full` is the facts' stored tokens; `tokens_shown` what the context spends on them:
  their reduced items, or the record that stands for summarized or externalized facts (a
  record that covers several ranges counts in each).

`unnamed` picks the ranges the visible text does not already name by their first seq (a
placeholder's "fact seq 57", a record's "fact seqs 12–40"), and `notice_text` names them in
one short text. Assembly names the ranges before the first fact the history shows in the stable
prefix, before the history: that notice changes only where the history's own start changes (a
compaction, the window's cut moving). Ranges within the shown history (an item normalization
leaves out mid-session) it names after the history: a new one there rewrites only what follows
the history, where before it every token of the history after the notice went uncached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from app.domain.compaction.clearing import is_cleared_output
from app.domain.items import CALL_TYPES, OUTPUT_TYPES, Item, item_type

__all__ = [
    "NOTICE_ID",
    "NOTICE_SOURCE",
    "Elided",
    "ElisionForm",
    "HistoryElisions",
    "Shown",
    "named_seqs",
    "notice_text",
    "unnamed",
]

ElisionForm = Literal["cleared", "truncated", "summarized", "externalized", "dropped", "excluded"]
NOTICE_SOURCE = "elision"
NOTICE_ID = "elided"
_NAMED_PREFIX = "fact seq"
_NAMED = re.compile(r"\bfact seqs? (\d+)\b")
"""Starts with a word boundary, which keeps `re` from searching for its literal prefix: a text
is searched only when it holds that prefix (a thirtieth of the time over a long history)."""
_STRATEGY_FORMS: Mapping[str, ElisionForm] = {
    "summary": "summarized",
    "notes": "summarized",
    "handoff": "externalized",
    "truncate": "dropped",
    "clear_tool_results": "cleared",
}


@dataclass(frozen=True)
class Elided:
    first_seq: int
    last_seq: int
    form: ElisionForm
    tokens_full: int
    tokens_shown: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The wire form (`elided` in an assembly's answer); a long session lists thousands."""
        return {
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "form": self.form,
            "tokens_full": self.tokens_full,
            "tokens_shown": self.tokens_shown,
            "reason": self.reason,
        }


class Shown(NamedTuple):
    """What the context made of one item of the normalized history."""

    tokens: int
    """Its tokens in the context; 0 when dropped."""
    dropped: str | None
    """Why the assembly left it out (a plan drop reason); None when shown."""
    cut: bool = False
    """Shown truncated by the assembly to fit what was left of the window."""


class _Status(NamedTuple):
    form: ElisionForm
    reason: str
    tokens_shown: int


def _call_key(item: Item) -> tuple[str, object] | None:
    kind = item_type(item)
    if kind in CALL_TYPES or kind in OUTPUT_TYPES:
        return kind, item.get("call_id")
    return None


class _Resolved(NamedTuple):
    """One active item's fact as the history alone places it: its seq, and either its status
    (`fixed`, whatever the plan) or the normalized position `j` whose plan decision sets it."""

    seq: int
    fixed: _Status | None
    j: int
    reduced: bool
    untouched: bool
    item: Item


class HistoryElisions:
    """What `elisions` needs of the history alone, worked out once for every plan tried against
    that history (settling a notice tries two or three): which fact each active item stands
    for and where normalization put it. `of` then lists the elided ranges of one plan.

    `history`: the session's history facts as (seq, item as logged, stored tokens), in seq
    order. `active_items` / `active_seqs`: the active history before normalization and the
    fact each item is verbatim (None for items a compaction wrote). `normalized`: that history
    normalized. `excluded[i]`: why normalization left out `active_items[i]`.
    `compacted_by[seq]`: (compaction id, strategy) of the compaction that took the fact out or
    reduced it. `compaction_id`: the latest compaction, whose record stands for every
    summarized or externalized fact (records merge), so that their ranges follow the record's
    own "fact seqs A–B".
    """

    def __init__(
        self,
        *,
        history: Sequence[tuple[int, Item, int]],
        active_items: Sequence[Item],
        active_seqs: Sequence[int | None],
        normalized: Sequence[Item],
        excluded: Mapping[int, str],
        compacted_by: Mapping[int, tuple[str, str]],
        compaction_id: str | None,
    ) -> None:
        self._history = history
        self._compacted_by = compacted_by
        self._compaction_id = compaction_id
        in_history = {seq for seq, _, _ in history}
        by_key: dict[tuple[str, object], int] = {}
        for logged_seq, logged_item, _ in history:
            logged_key = _call_key(logged_item)
            if logged_key is not None:
                by_key.setdefault(logged_key, logged_seq)
        position_of = {id(item): j for j, item in enumerate(normalized)}
        normalized_by_key = {
            key: j for j, item in enumerate(normalized) if (key := _call_key(item)) is not None
        }
        resolved: list[_Resolved] = []
        for i, (item, verbatim_seq) in enumerate(zip(active_items, active_seqs, strict=True)):
            reduced = verbatim_seq is None
            seq = verbatim_seq
            if reduced:  # a compaction's placeholder for a fact it cleared, or its own record
                key = _call_key(item)
                seq = by_key.get(key) if key is not None else None
            if seq is None or seq not in in_history:
                continue
            if i in excluded:
                fixed = _Status("excluded", f"normalization: {excluded[i]}", 0)
                resolved.append(_Resolved(seq, fixed, -1, reduced, False, item))
                continue
            j = position_of.get(id(item))
            untouched = j is not None
            if j is None:
                key = _call_key(item)
                j = normalized_by_key.get(key) if key is not None else None
            if j is None:  # an orphan output normalization removed
                fixed = _Status("excluded", "normalization: removed", 0)
                resolved.append(_Resolved(seq, fixed, -1, reduced, False, item))
                continue
            resolved.append(_Resolved(seq, None, j, reduced, untouched, item))
        self._resolved = resolved

    def of(self, shown: Mapping[int, Shown], *, record_tokens: int) -> tuple[Elided, ...]:
        """The elided ranges of a context (see the module docstring). `shown[j]`: what the
        context made of the j-th normalized item (missing: a world-state fragment, shown as
        state). `record_tokens`: tokens of the compaction records the context shows."""
        status: dict[int, _Status | None] = {}
        for seq, fixed, j, reduced, untouched, item in self._resolved:
            if fixed is not None:
                status[seq] = fixed
                continue
            seen = shown.get(j)
            if seen is None:  # not offered to the assembly: shown another way
                status[seq] = None
            elif seen.dropped is not None:
                status[seq] = _Status("dropped", seen.dropped, 0)
            elif reduced:
                compaction = self._compacted_by.get(seq, ("", ""))[0]
                form: ElisionForm = "cleared" if is_cleared_output(item) else "truncated"
                status[seq] = _Status(form, f"compaction {compaction}", seen.tokens)
            elif not untouched:
                status[seq] = _Status("truncated", "truncation policy", seen.tokens)
            elif seen.cut:
                status[seq] = _Status("truncated", "max_tokens", seen.tokens)
            else:
                status[seq] = None
        # Ranges as [first, last, form, reason, tokens_full, tokens_shown], made Elided at the
        # end: a long history merges thousands of facts, and a frozen dataclass is slow to build.
        ranges: list[list[Any]] = []
        extends = False  # whether the previous history fact was listed: a shown one ends a range
        for seq, _, tokens in self._history:
            if seq in status:
                found = status[seq]
                if found is None:
                    extends = False
                    continue
            else:  # not in the active history: a compaction took it out
                compaction, strategy = self._compacted_by.get(seq, ("", "truncate"))
                form = _STRATEGY_FORMS.get(strategy, "dropped")
                recorded = form in ("summarized", "externalized")
                if recorded and self._compaction_id is not None:
                    compaction = self._compaction_id
                found = _Status(form, f"compaction {compaction}", record_tokens if recorded else 0)
            last = ranges[-1] if ranges and extends else None
            extends = True
            if last is not None and last[2] == found.form and last[3] == found.reason:
                last[1] = seq
                last[4] += tokens
                if found.form not in ("summarized", "externalized"):  # their record is shared
                    last[5] += found.tokens_shown
            else:
                ranges.append([seq, seq, found.form, found.reason, tokens, found.tokens_shown])
        return tuple(
            Elided(first, last_seq, form, full, shown_tokens, reason)
            for first, last_seq, form, reason, full, shown_tokens in ranges
        )


def named_seqs(texts: Iterable[str]) -> frozenset[int]:
    """The seqs the texts name as "fact seq N" or "fact seqs N–M" (the first of a range)."""
    return frozenset(
        int(number) for text in texts if _NAMED_PREFIX in text for number in _NAMED.findall(text)
    )


def unnamed(entries: Sequence[Elided], named: frozenset[int]) -> tuple[Elided, ...]:
    """The entries whose first seq the visible text does not name."""
    return tuple(entry for entry in entries if entry.first_seq not in named)


def notice_text(entries: Sequence[Elided], *, tool: str | None) -> str | None:
    """One short text naming `entries` by seq, and how to read them back (`tool`, when the
    context offers a recall tool); None when there is nothing to name."""
    if not entries:
        return None
    parts = [
        f"fact seq {e.first_seq}"
        if e.first_seq == e.last_seq
        else f"fact seqs {e.first_seq}–{e.last_seq}"
        for e in entries
    ]
    described = "; ".join(
        f"{part} ({entry.form}, {entry.reason})" for part, entry in zip(parts, entries, strict=True)
    )
    how = f"read any of them with {tool}" if tool else "they are kept whole in the session log"
    return f"[contextd: not shown in this context: {described}. Nothing is lost: {how}.]"
