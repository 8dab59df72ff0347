"""A session's fact log: appends (facts and compactions) and reads. None of these commits: the
caller owns the transaction.

Appends serialise per session on the session row (`SELECT ... FOR UPDATE` in PostgreSQL,
the database write lock in SQLite), so sequence numbers are gap-free and dense; the
`(session_id, seq)` primary key is the last line of defence against a duplicate. A client's
batch on PostgreSQL takes the row lock in the statement that writes it (`app.storage.appends`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.errors import IdempotencyMismatch, SequenceConflict
from app.domain.facts import NewFact
from app.storage.tables import Fact, SessionRow


@dataclass(frozen=True)
class AppendedFact:
    seq: int
    type: str
    tokens: int


@dataclass(frozen=True)
class AppendResult:
    facts: tuple[AppendedFact, ...]
    replayed: bool
    """True when the idempotency key had been seen: nothing was written."""
    timeline: int | None = None
    """The database timeline that wrote the facts (`Fact.timeline`): one batch, one
    transaction, one timeline."""

    @classmethod
    def written(
        cls, first_seq: int, facts: Sequence[NewFact], *, timeline: int | None
    ) -> AppendResult:
        """`facts`, written from `first_seq` on, on `timeline`."""
        return cls(
            facts=tuple(
                AppendedFact(first_seq + offset, fact.type, fact.tokens)
                for offset, fact in enumerate(facts)
            ),
            replayed=False,
            timeline=timeline,
        )


def replay_batch(
    db: Session,
    *,
    session_pk: int,
    facts: Sequence[NewFact],
    unit: str | None,
    phase: str | None,
    idempotency_key: str,
) -> AppendResult | None:
    """The batch `idempotency_key` wrote, as first written, when `facts` are that batch (the
    same items in the same order, as stored, with the same originals, provenance, unit and
    phase; JSON values compared, not bytes); None when the key wrote nothing; with another
    batch `IdempotencyMismatch`."""
    earlier = db.execute(
        select(
            Fact.seq,
            Fact.type,
            Fact.tokens,
            Fact.item,
            Fact.original,
            Fact.provenance,
            Fact.unit,
            Fact.phase,
            Fact.timeline,
        )
        .where(Fact.session_id == session_pk, Fact.idempotency_key == idempotency_key)
        .order_by(Fact.seq)
    ).all()
    if not earlier:
        return None
    kept = [(f.item, f.original, f.provenance, f.unit, f.phase) for f in earlier]
    sent = [(f.item, f.original, f.provenance, unit, phase) for f in facts]
    if kept != sent:
        raise IdempotencyMismatch(
            key=idempotency_key, first_seq=earlier[0].seq, last_seq=earlier[-1].seq
        )
    return AppendResult(
        facts=tuple(AppendedFact(f.seq, f.type, f.tokens) for f in earlier),
        replayed=True,
        timeline=earlier[0].timeline,
    )


def append_facts(
    db: Session,
    *,
    session: SessionRow,
    facts: Sequence[NewFact],
    unit: str | None = None,
    phase: str | None = None,
    idempotency_key: str | None = None,
    expected_last_seq: int | None = None,
    recorded_at: datetime,
) -> AppendResult:
    """Append `facts` atomically after the session's last seq, recorded at `recorded_at` (the
    service's clock: `app.clock`). `session` must be locked.

    A known `idempotency_key` is a replay when the batch is the same as the one the key
    names (`replay_batch`): nothing is written and the original result is returned. With another
    batch it is `IdempotencyMismatch`.
    """
    if idempotency_key is not None:
        replayed = replay_batch(
            db,
            session_pk=session.id,
            facts=facts,
            unit=unit,
            phase=phase,
            idempotency_key=idempotency_key,
        )
        if replayed is not None:
            return replayed
    if expected_last_seq is not None and expected_last_seq != session.last_seq:
        raise SequenceConflict(expected=expected_last_seq, actual=session.last_seq)
    first_seq = session.last_seq + 1
    rows = [
        {
            "session_id": session.id,
            "seq": first_seq + offset,
            "type": fact.type,
            "item": fact.item,
            "tokens": fact.tokens,
            "unit": unit,
            "phase": phase,
            "provenance": fact.provenance,
            "idempotency_key": idempotency_key,
            "recorded_at": recorded_at,
            "original": fact.original,
        }
        for offset, fact in enumerate(facts)
    ]
    try:
        timelines = db.scalars(insert(Fact).returning(Fact.timeline), rows).all()
    except IntegrityError as exc:
        raise SequenceConflict(expected=session.last_seq, actual=session.last_seq + 1) from exc
    session.last_seq = first_seq + len(rows) - 1
    db.flush()
    return AppendResult.written(first_seq, facts, timeline=timelines[0])


def read_facts(
    db: Session,
    *,
    session_id: int,
    after_seq: int = 0,
    limit: int | None = None,
    up_to_seq: int | None = None,
) -> Sequence[Row[Any]]:
    """Facts in seq order, as read-only rows (attribute access by column name).

    Rows, not ORM objects: facts are never modified, and skipping the identity map makes
    reading a 10,000-item log several times faster.
    """
    facts = Fact.__table__
    query = (
        select(facts)
        .where(facts.c.session_id == session_id, facts.c.seq > after_seq)
        .order_by(facts.c.seq)
    )
    if up_to_seq is not None:
        query = query.where(facts.c.seq <= up_to_seq)
    if limit is not None:
        query = query.limit(limit)
    return db.execute(query).all()


def fact_items(db: Session, *, session_id: int, seqs: Sequence[int]) -> list[tuple[int, Any]]:
    """(seq, item) of the facts `seqs` of the session, in seq order (one read)."""
    if not seqs:
        return []
    facts = Fact.__table__
    return [
        (row.seq, row.item)
        for row in db.execute(
            select(facts.c.seq, facts.c.item)
            .where(facts.c.session_id == session_id, facts.c.seq.in_(seqs))
            .order_by(facts.c.seq)
        )
    ]


def get_fact(db: Session, *, session_id: int, seq: int) -> Row[Any] | None:
    """Fact `seq` of the session, as a read-only row; None when the log has no such seq."""
    facts = Fact.__table__
    query = select(facts).where(facts.c.session_id == session_id, facts.c.seq == seq)
    return db.execute(query).first()
