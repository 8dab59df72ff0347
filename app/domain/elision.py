"""What a context leaves out of the session's history, and the notice that names it.

`elided` lists every fact of the session's history (the model-visible facts since the last
reset, less retracted ones and world-state fragments, which the world state shows) that a
context shows reduced or not at all, as seq ranges of one form and one reason. Invariants:

- Deterministic: the same log and the same context give the same list, in seq order.
- Every listed seq is a fact of the log, so recall can read it; a fact shown verbatim is never
  listed. A range merges consecutive listed facts of one form and reason (a fact shown between
  them ends it; facts that are not part of the history, such as goal versions, do not).
- `tokens_full` is the facts' stored tokens; `tokens_shown` what the context spends on them:
  their reduced items, or the record that stands for summarized or externalized facts (a
  record that covers several ranges counts in each).
- A fact's status is read from the item that stands for it in the active history (the fact
  itself, or the placeholder a compaction wrote for it) and that item's normalized row: left
  out by normalization (`excluded`), dropped by the plan, shown reduced (`truncated`,
  `cleared`), or shown as it is (not listed). A fact no active item stands for was taken out by
  a compaction, and takes its strategy's form.
- Its cost is bounded by what the context shows, not by the log: every fact's status *as if
  dropped* is kept as runs (`ElisionBase`), advanced with the session view by the facts
  appended since, and a context reads those runs, overriding them at the facts it shows; only
  the facts of the view's open tail are read one by one.

`unnamed` picks the ranges the visible text does not already name by their first seq (a
placeholder's "fact seq 57", a record's "fact seqs 12–40"), and `notice_text` names them in
one short text. Assembly names the ranges before the first fact the history shows in the stable
prefix, before the history: that notice changes only where the history's own start changes (a
compaction, the window's cut moving). Ranges within the shown history (an item normalization
leaves out mid-session) it names after the history: a new one there rewrites only what follows
the history, where before it every token of the history after the notice went uncached.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from app.domain.column_codec import Span
from app.domain.compaction.clearing import is_cleared_output
from app.domain.facts import ActiveHistory
from app.domain.growing import Claims, grown
from app.domain.items import logged_key
from app.domain.session_view import HistoryView
from app.domain.world_state import is_state_fragment

__all__ = [
    "NOTICE_ID",
    "NOTICE_SOURCE",
    "Elided",
    "ElisionBase",
    "ElisionForm",
    "Shown",
    "elided",
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


_RECORDED: frozenset[str] = frozenset({"summarized", "externalized"})
"""Forms whose facts one record stands for: a range of them shows the record's tokens once."""
_BaseStatus = tuple[ElisionForm, str | None]
"""A fact's (form, reason) were the context to drop all it can; reason None: dropped, for the
reason the plan gives; `_LATEST`: the latest compaction's, whose record stands for the fact."""
_DROPPED: _BaseStatus = ("dropped", None)
_LATEST = "\x00latest compaction"


class _Base:
    """Base statuses of a session's history facts in seq order, as runs, for the facts no
    appended fact can change: growing with the view's settled items, shared like them
    (`app.domain.growing`)."""

    def __init__(self, settled: object, epoch: int, written: Mapping[int, int]) -> None:
        self.settled = settled
        self.epoch = epoch
        self.written = written
        """Each history fact a written item (a compaction's placeholder) stands for, by seq:
        that item's position (the last, where several stand for one fact)."""
        self.of_written = {position: seq for seq, position in written.items()}
        self.read = 0
        """How many logged facts, in seq order, are read."""
        self.seqs: list[int] = []
        """The history facts read, in seq order."""
        self.cumulative: list[int] = [0]
        """`cumulative[n]`: the stored tokens of the first n history facts."""
        self.starts: list[int] = []
        """Where each run starts, in `seqs`."""
        self.statuses: list[_BaseStatus] = []
        self.reset_at = 0
        """The reset this base's history starts after."""
        self.active_from: int | None = None
        """The first fact read whose status an active item gave (every later one may be too):
        where a new epoch starts reading again."""
        self.claims = Claims()

    def lengths(self) -> tuple[int, int, int]:
        return self.read, len(self.seqs), len(self.starts)

    def copy(self, lengths: tuple[int, int, int]) -> _Base:
        """An unshared copy of the first `lengths` of this base."""
        read, facts, runs = lengths
        return self._kept(
            facts, runs, settled=self.settled, epoch=self.epoch, written=self.written, read=read
        )

    def carried(
        self,
        lengths: tuple[int, int, int],
        *,
        settled: object,
        epoch: int,
        written: Mapping[int, int],
        before: int,
        read: int,
    ) -> _Base:
        """A base of a later epoch that keeps this one's statuses of the facts before seq
        `before` (the first logged fact from there is at `read`)."""
        _, facts, runs = lengths
        kept = bisect.bisect_left(self.seqs, before, hi=facts)
        return self._kept(
            kept,
            bisect.bisect_left(self.starts, kept, hi=runs),
            settled=settled,
            epoch=epoch,
            written=written,
            read=read,
        )

    def _kept(
        self,
        facts: int,
        runs: int,
        *,
        settled: object,
        epoch: int,
        written: Mapping[int, int],
        read: int,
    ) -> _Base:
        kept = _Base(settled, epoch, written)
        kept.read = read
        kept.seqs = self.seqs[:facts]
        kept.cumulative = self.cumulative[: facts + 1]
        kept.starts = self.starts[:runs]
        kept.statuses = self.statuses[:runs]
        kept.reset_at = self.reset_at
        first = self.active_from
        # Facts are read in seq order: the first active one is among those kept, or none is.
        kept.active_from = (
            first if first is not None and kept.seqs and first <= kept.seqs[-1] else None
        )
        return kept

    def add(self, seq: int, tokens: int, status: _BaseStatus, *, active: bool) -> None:
        if active and self.active_from is None:
            self.active_from = seq
        if not self.statuses or self.statuses[-1] != status:
            self.starts.append(len(self.seqs))
            self.statuses.append(status)
        self.seqs.append(seq)
        self.cumulative.append(self.cumulative[-1] + tokens)


@dataclass(frozen=True)
class ElisionBase:
    """The base statuses one view's contexts read their elisions from, as far as `lengths`
    say (see `elided`)."""

    base: _Base
    lengths: tuple[int, int, int]

    def record(self) -> dict[str, Any]:
        """These statuses as a checkpoint holds them."""
        base, (read, facts, runs) = self.base, self.lengths
        return {
            "epoch": base.epoch,
            "written": [[seq, at] for seq, at in base.written.items()],
            "read": read,
            "seqs": Span(base.seqs, facts),
            "cumulative": Span(base.cumulative, facts + 1),
            "starts": Span(base.starts, runs),
            "statuses": Span(base.statuses, runs, each=list),
            "reset_at": base.reset_at,
            "active_from": base.active_from,
        }

    @classmethod
    def restored(cls, record: Mapping[str, Any], settled: object) -> ElisionBase:
        """The statuses `record` holds (`record`), read against the settled columns
        `settled`."""
        base = _Base(settled, record["epoch"], dict(record["written"]))
        base.read, base.seqs, base.cumulative = record["read"], record["seqs"], record["cumulative"]
        base.starts = record["starts"]
        base.statuses = [(form, reason) for form, reason in record["statuses"]]
        base.reset_at, base.active_from = record["reset_at"], record["active_from"]
        return cls(base, base.lengths())


class _Facts:
    """The session's history facts as one view sees them."""

    def __init__(self, active: ActiveHistory, view: HistoryView, base: _Base) -> None:
        self.active, self.view, self.base = active, view, base
        self.logged = active.logged

    def is_history(self, seq: int) -> bool:
        """Whether the logged fact `seq` is part of the session's history: model-visible text
        logged since the last reset, not retracted, not a world-state fragment."""
        logged = self.logged
        return bool(
            logged.tokens_of(seq)
            and seq > self.active.reset_at
            and seq not in self.active.retracted
            and not is_state_fragment(logged.item_of(seq))
        )

    def source(self, seq: int) -> tuple[int, bool] | None:
        """The active item that stands for the fact `seq` (the later where two do) and whether
        a compaction wrote it; None when no active item does."""
        verbatim = self.active.position_of(seq)
        written = self.base.written.get(seq)
        if (
            written is not None
            and written < len(self.active.items)
            and (verbatim is None or written > verbatim)
        ):
            return written, True
        return None if verbatim is None else (verbatim, False)

    def fact_at(self, source: int) -> int | None:
        """The history fact the active item at `source` stands for, if it does."""
        seq = self.active.seqs[source]
        if seq is not None and seq not in self.base.written:
            # A logged fact the active history holds as it is (so since the last reset, and
            # not retracted): history unless it has no visible text or is a state fragment.
            if not self.active.stored_tokens[source] or is_state_fragment(
                self.active.items[source]
            ):
                return None
            return seq
        if seq is None:
            seq = self.base.of_written.get(source)
        if seq is None or seq not in self.logged or not self.is_history(seq):
            return None
        found = self.source(seq)
        return seq if found is not None and found[0] == source else None

    def base_status(self, seq: int) -> _BaseStatus:
        found = self.source(seq)
        if found is None:  # no active item stands for it: a compaction took it out
            compaction, strategy = self.active.compacted_by.get(seq, ("", "truncate"))
            form = _STRATEGY_FORMS.get(strategy, "dropped")
            if form in _RECORDED and self.active.compaction_id is not None:
                return form, _LATEST
            return form, f"compaction {compaction}"
        reason = self.view.excluded_reason(found[0])
        if reason is not None:
            return "excluded", f"normalization: {reason}"
        if self.view.row_of(found[0]) is None:  # an orphan output normalization removed
            return "excluded", "normalization: removed"
        return _DROPPED

    def shown_status(self, seq: int, seen: Shown) -> _Status | None:
        """The status of a fact with a row in the context, which made `seen` of it."""
        if seen.dropped is not None:
            return _Status("dropped", seen.dropped, 0)
        source, written = self.source(seq) or (0, False)
        row = self.view.row_of(source)
        assert row is not None
        item = self.view.items[row]
        if written:
            compaction = self.active.compacted_by.get(seq, ("", ""))[0]
            form: ElisionForm = "cleared" if is_cleared_output(item) else "truncated"
            return _Status(form, f"compaction {compaction}", seen.tokens)
        if item is not self.active.items[source]:
            return _Status("truncated", "truncation policy", seen.tokens)
        if seen.cut:
            return _Status("truncated", "max_tokens", seen.tokens)
        return None


def _written_facts(active: ActiveHistory, view: HistoryView) -> dict[int, int]:
    """Each history fact a written item stands for (the first history fact under the item's
    call key), by seq: the item's position, the last where several stand for one fact."""
    facts = _Facts(active, view, _Base(None, active.epoch, {}))
    found: dict[int, int] = {}
    for position in active.written:
        key = logged_key(active.items[position])
        if key is None:
            continue
        seq = next((s for s in active.logged.keyed(key) if facts.is_history(s)), None)
        if seq is not None:
            found[seq] = position
    return found


def _start(previous: ElisionBase | None, active: ActiveHistory, view: HistoryView) -> ElisionBase:
    """A base for `view`: `previous` where it belongs to the same view lineage. Where it is of
    an earlier epoch of the same log since the same reset, its statuses of the facts before the
    first that an active item stood for then or stands for now: a compaction's or a
    retraction's facts are all active ones, and none changes a status before them (the
    latest compaction's record is named when read). Else a new one."""
    if previous is not None and previous.base.settled is view.settled:
        return previous
    written = _written_facts(active, view)
    order = active.logged.order
    if (
        previous is None
        or previous.base.epoch >= active.epoch
        or previous.base.reset_at != active.reset_at
    ):
        base = _Base(view.settled, active.epoch, written)
        base.reset_at = active.reset_at
        base.read = bisect.bisect_right(order, active.reset_at)
        return ElisionBase(base, base.lengths())
    old, read = previous.base, previous.lengths[0]
    floors = [seq for seq in active.seqs if seq is not None]
    floors += list(written)
    if old.active_from is not None:
        floors.append(old.active_from)
    if read < len(order):
        floors.append(order[read])
    before = min(floors, default=order[read] if read < len(order) else active.last_seq + 1)
    base = old.carried(
        previous.lengths,
        settled=view.settled,
        epoch=active.epoch,
        written=written,
        before=before,
        read=bisect.bisect_left(order, before),
    )
    return ElisionBase(base, base.lengths())


def _advance(previous: ElisionBase | None, active: ActiveHistory, view: HistoryView) -> ElisionBase:
    """The base statuses of every history fact before the first one an item of the view's
    open tail stands for, advanced from `previous` (see `_start`)."""
    previous = _start(previous, active, view)
    facts = _Facts(active, view, previous.base)
    order = active.logged.order
    frontier = min(
        (
            seq
            for source in range(view.boundary, len(active.items))
            if (seq := facts.fact_at(source)) is not None
        ),
        default=None,
    )
    end = len(order) if frontier is None else bisect.bisect_left(order, frontier)
    read = previous.lengths[0]
    if end <= read:
        return previous

    def grow(base: _Base) -> None:
        facts.base = base
        for index in range(read, end):
            seq = order[index]
            if facts.is_history(seq):
                base.add(
                    seq,
                    facts.logged.tokens_of(seq),
                    facts.base_status(seq),
                    active=facts.source(seq) is not None,
                )
        base.read = end

    base = grown(
        previous.base,
        read=previous.lengths,
        now=previous.base.lengths(),
        copy=lambda: previous.base.copy(previous.lengths),
        grow=grow,
    )
    return ElisionBase(base, base.lengths())


def elided(
    previous: ElisionBase | None,
    active: ActiveHistory,
    view: HistoryView,
    *,
    shown: Mapping[int, Shown],
    default_drop: str,
    record_tokens: int,
) -> tuple[tuple[Elided, ...], ElisionBase]:
    """What a context leaves out of the session's history (see the module docstring), and the
    base statuses it was read from (pass them to the next call of the same view lineage).

    `shown[row]`: what the context made of the view's normalized item at `row`, for every row
    it shows and any row it drops for a reason other than `default_drop` (every other row is
    dropped for that). `record_tokens`: tokens of the compaction records the context shows.
    """
    current = _advance(previous, active, view)
    base = current.base
    read, facts_read, runs = current.lengths
    facts = _Facts(active, view, base)
    overrides: dict[int, _Status | None] = {}
    for row, seen in shown.items():
        source = view.sources[row]
        seq = None if source is None else facts.fact_at(source)
        if seq is not None:
            overrides[seq] = facts.shown_status(seq, seen)
    ranges = _Ranges()
    ordinals = sorted(
        (bisect.bisect_left(base.seqs, seq, hi=facts_read), seq)
        for seq in overrides
        if seq <= (base.seqs[facts_read - 1] if facts_read else 0)
    )
    cursor = 0
    for run in range(runs):
        start = base.starts[run]
        stop = base.starts[run + 1] if run + 1 < runs else facts_read
        status = _resolved(
            base.statuses[run],
            default_drop=default_drop,
            record_tokens=record_tokens,
            active=active,
        )
        while cursor < len(ordinals) and ordinals[cursor][0] < stop:
            ordinal, seq = ordinals[cursor]
            ranges.add(base.seqs, base.cumulative, start, ordinal, status)
            ranges.fact(seq, active.logged.tokens_of(seq), overrides[seq])
            start = ordinal + 1
            cursor += 1
        ranges.add(base.seqs, base.cumulative, start, stop, status)
    order = active.logged.order
    for index in range(read, len(order)):
        seq = order[index]
        if not facts.is_history(seq):
            continue
        status_or_none = (
            overrides[seq]
            if seq in overrides
            else _resolved(
                facts.base_status(seq),
                default_drop=default_drop,
                record_tokens=record_tokens,
                active=active,
            )
        )
        ranges.fact(seq, active.logged.tokens_of(seq), status_or_none)
    return ranges.elided(), current


def _resolved(
    status: _BaseStatus, *, default_drop: str, record_tokens: int, active: ActiveHistory
) -> _Status:
    """A base status as a context gives it: dropped for its reason, the latest compaction
    named, a record's tokens shown for the facts it stands for."""
    form, reason = status
    if reason is None:
        reason = default_drop
    elif reason == _LATEST:
        reason = f"compaction {active.compaction_id}"
    return _Status(form, reason, record_tokens if form in _RECORDED else 0)


class _Ranges:
    """Ranges merged from facts in seq order: consecutive listed facts of one form and reason
    make one; a fact shown verbatim ends it."""

    def __init__(self) -> None:
        # [first, last, form, reason, tokens_full, tokens_shown]: made `Elided` at the end, as
        # a frozen dataclass is slow to build and a long history merges thousands of facts.
        self._ranges: list[list[Any]] = []
        self._extends = False

    def add(
        self,
        seqs: Sequence[int],
        cumulative: Sequence[int],
        start: int,
        stop: int,
        status: _Status,
    ) -> None:
        """The facts `seqs[start:stop]`, all of `status`."""
        if stop <= start:
            return
        self._extend(seqs[start], seqs[stop - 1], cumulative[stop] - cumulative[start], status)

    def fact(self, seq: int, tokens: int, status: _Status | None) -> None:
        if status is None:
            self._extends = False
            return
        self._extend(seq, seq, tokens, status)

    def _extend(self, first: int, last_seq: int, tokens: int, status: _Status) -> None:
        last = self._ranges[-1] if self._ranges and self._extends else None
        self._extends = True
        if last is not None and last[2] == status.form and last[3] == status.reason:
            last[1] = last_seq
            last[4] += tokens
            if status.form not in _RECORDED:  # their record is shared
                last[5] += status.tokens_shown
        else:
            self._ranges.append(
                [first, last_seq, status.form, status.reason, tokens, status.tokens_shown]
            )

    def elided(self) -> tuple[Elided, ...]:
        return tuple(
            Elided(first, last_seq, form, full, shown_tokens, reason)
            for first, last_seq, form, reason, full, shown_tokens in self._ranges
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
