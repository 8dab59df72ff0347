"""What the active history shows, changed by facts: a retraction hides one item (and what it is
paired with), a reset starts the active history empty. Both are written under the session's
lock; the log keeps everything."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.contract.projection import ResetResponse, RetractedItem, RetractionResponse
from app.domain.facts import plan_retraction, reset_fact
from app.storage import fact_log, session_rows
from app.storage.folds import fold_session

__all__ = ["reset", "retract"]


def retract(
    db: Session, *, tenant_id: int, session_id: str, seq: int | None, now: datetime
) -> RetractionResponse:
    """`POST /sessions/{id}/retractions`: item `seq` (the newest shown when None) hidden, with
    its call or outputs, by a fact recorded `now`; refusals are `plan_retraction`'s."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    retraction = plan_retraction(fold_session(db, session), seq)
    written = fact_log.append_facts(db, session=session, facts=[retraction.fact], recorded_at=now)
    db.commit()
    return RetractionResponse(
        seq=written.facts[0].seq,
        retracted=[seq for seq, _ in retraction.hidden],
        items=[RetractedItem(seq=seq, item=item) for seq, item in retraction.hidden],
    )


def reset(db: Session, *, tenant_id: int, session_id: str, now: datetime) -> ResetResponse:
    """`POST /sessions/{id}/reset`: from `now` on the active history starts empty; the goal and
    world state stay."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    written = fact_log.append_facts(db, session=session, facts=[reset_fact()], recorded_at=now)
    db.commit()
    return ResetResponse(seq=written.facts[0].seq)
