"""Recall: a fact read back in windows of whole lines, or the lines of the log matching a
pattern. Writes nothing; the runtime appends the model's recall call and its output like any
tool call. Bounds beyond the service's caps are capped, and the answer states those applied.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from sqlalchemy.orm import Session

from app.contract.recall import RecallMatchBody, RecallRequest, RecallResponse
from app.domain.errors import SeqPastLog, TenantBusy
from app.domain.facts import fact_text
from app.domain.recall import (
    compile_pattern,
    read_window,
    search,
    search_output,
    window_output,
)
from app.metrics import record_recall
from app.settings import Settings
from app.storage import fact_log, session_rows
from app.storage.tables import SessionRow
from app.tenant_slots import TenantSlots
from app.tokens import token_counter

__all__ = ["recall"]

_SCAN_BATCH = 100
"""Facts read per query while searching a range: memory stays bounded by a batch."""


def _texts(db: Session, session_pk: int, first: int, last: int) -> Iterator[tuple[int, str]]:
    """The texts of facts `first` to `last`, read a batch at a time, each read's transaction
    ended before its texts are searched: no connection is held while the pattern runs."""
    after = first - 1
    while after < last:
        rows = fact_log.read_facts(
            db, session_id=session_pk, after_seq=after, up_to_seq=last, limit=_SCAN_BATCH
        )
        db.rollback()
        if not rows:
            return
        for row in rows:
            yield row.seq, fact_text(row.type, row.item)
        after = rows[-1].seq


_searching = TenantSlots()
"""Recall searches under way in this process, by tenant."""


def _cpu_bound(seconds: float) -> Callable[[], bool]:
    """Whether this thread has spent `seconds` of CPU since the call (a search runs on one
    worker thread)."""
    deadline = time.thread_time() + seconds
    return lambda: time.thread_time() >= deadline


def recall(
    db: Session, *, tenant_id: int, session_id: str, body: RecallRequest, settings: Settings
) -> RecallResponse:
    """Reads fact `seq` back in a window of whole lines, or lists the lines matching `pattern`
    in one fact or a seq range. Bounds beyond the service's caps are capped, and the answer
    states the bounds applied."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    first = body.seq if body.seq is not None else body.from_seq or 1
    if first > session.last_seq:
        mode = "window" if body.pattern is None else "search"
        record_recall(mode=mode, outcome="not_found", tokens=0, unit=session.unit, tenant=tenant_id)
        raise SeqPastLog(f"session has no seq {first} (its last is {session.last_seq})")
    if body.pattern is None:
        return _read_back(db, session, body, settings)
    return _search(db, session, body, settings)


def _bounds(body: RecallRequest, settings: Settings) -> dict[str, int]:
    """The request's bounds, capped by the service's."""
    return {
        "max_lines": min(body.max_lines, settings.recall_max_lines),
        "max_tokens": min(body.max_tokens, settings.recall_max_tokens),
        "max_matches": min(body.max_matches, settings.recall_max_matches),
    }


def _read_back(
    db: Session, session: SessionRow, body: RecallRequest, settings: Settings
) -> RecallResponse:
    """Fact `body.seq` read back in a window of whole lines from `from_line`."""
    bounds = _bounds(body, settings)
    assert body.seq is not None  # the contract asks for `seq` where there is no `pattern`
    fact = fact_log.get_fact(db, session_id=session.id, seq=body.seq)
    assert fact is not None  # a seq up to last_seq is in the dense log
    count = token_counter(session.encoding)
    window = read_window(
        fact_text(fact.type, fact.item),
        from_line=body.from_line,
        from_char=body.from_char,
        max_lines=bounds["max_lines"],
        max_tokens=bounds["max_tokens"],
        count_tokens=count,
    )
    output = window_output(body.seq, fact.type, window)
    record_recall(
        mode="window",
        outcome="found",
        tokens=count(output),
        unit=session.unit,
        tenant=session.tenant_id,
    )
    return RecallResponse(
        seq=body.seq,
        type=fact.type,
        text=window.text,
        from_line=window.from_line,
        from_char=window.from_char,
        to_line=window.to_line,
        total_lines=window.total_lines,
        tokens=window.tokens,
        next_from_line=window.next_from_line,
        next_from_char=window.next_from_char if window.next_from_line is not None else None,
        matches=[],
        from_seq=None,
        to_seq=None,
        next_from_seq=None,
        tool_output=output,
        **bounds,
    )


def _search(
    db: Session, session: SessionRow, body: RecallRequest, settings: Settings
) -> RecallResponse:
    """The lines matching `body.pattern` in fact `seq`, or in the range `from_seq`..`to_seq`,
    searched with no transaction open, within the tenant's concurrent searches and the
    service's bytes and CPU time."""
    assert body.pattern is not None
    bounds = _bounds(body, settings)
    tenant_id, unit, session_pk = session.tenant_id, session.unit, session.id
    count = token_counter(session.encoding)
    first = body.seq if body.seq is not None else body.from_seq or 1
    last = (
        body.seq if body.seq is not None else min(body.to_seq or session.last_seq, session.last_seq)
    )
    pattern = compile_pattern(body.pattern)
    fact = fact_log.get_fact(db, session_id=session.id, seq=first) if body.seq else None
    db.rollback()  # the pattern runs with no transaction open (and no connection held)
    texts = (
        [(first, fact_text(fact.type, fact.item))] if fact else _texts(db, session_pk, first, last)
    )
    limit = settings.recall_max_concurrent_per_tenant
    with _searching.taken(tenant_id, limit=limit) as taken:
        if not taken:
            raise TenantBusy(
                f"this tenant has {limit} recall searches under way, as many as it may at"
                " once (CTX_RECALL_MAX_CONCURRENT_PER_TENANT); retry after the given seconds",
                details={"limit": limit},
            )
        found = search(
            pattern,
            texts,
            max_matches=bounds["max_matches"],
            max_bytes=settings.recall_max_scan_bytes,
            from_line=body.from_line,
            exhausted=_cpu_bound(settings.recall_max_scan_seconds),
        )
    output = search_output(body.pattern, first, last, found)
    outcome = "found" if found.matches else "no_match"
    record_recall(mode="search", outcome=outcome, tokens=count(output), unit=unit, tenant=tenant_id)
    return RecallResponse(
        seq=body.seq,
        type=fact.type if fact else None,
        text=None,
        from_line=None,
        from_char=None,
        to_line=None,
        total_lines=None,
        tokens=None,
        next_from_line=found.next_from_line,
        next_from_char=None,
        matches=[RecallMatchBody(seq=m.seq, line=m.line, text=m.text) for m in found.matches],
        from_seq=first,
        to_seq=last,
        next_from_seq=found.next_from_seq,
        stopped_by=found.stopped_by,
        scanned_bytes=found.scanned_bytes,
        max_scan_bytes=settings.recall_max_scan_bytes,
        max_scan_seconds=settings.recall_max_scan_seconds,
        tool_output=output,
        **bounds,
    )
