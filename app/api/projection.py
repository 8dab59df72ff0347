"""What the active history shows, changed by facts: a retraction hides one item (and what it is
paired with), a reset starts the active history empty. The log keeps everything; both facts
appear in the raw log like any other."""

from __future__ import annotations

from fastapi import APIRouter, status

from app.api.deps import Db, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.projection import (
    ResetResponse,
    RetractedItem,
    RetractionRequest,
    RetractionResponse,
)
from app.domain.facts import plan_retraction, reset_fact
from app.storage import repository
from app.storage.history import fold_session

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)


@router.post(
    "/{session_id}/retractions",
    status_code=status.HTTP_201_CREATED,
    response_model=RetractionResponse,
    responses=rule_responses("unstorable_value"),
)
def retract(
    session_id: str, body: RetractionRequest, tenant_id: TenantId, db: Db, now: Now
) -> RetractionResponse:
    """Hides item `seq` (the newest shown when none is given) from the active history, with
    its call or outputs (pairing holds). Refusals are 409s: `nothing_to_retract`,
    `not_in_active_history` (past the log included), `already_retracted`."""
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    retraction = plan_retraction(fold_session(db, session), body.seq)
    written = repository.append_facts(db, session=session, facts=[retraction.fact], recorded_at=now)
    db.commit()
    return RetractionResponse(
        seq=written.facts[0].seq,
        retracted=[seq for seq, _ in retraction.hidden],
        items=[RetractedItem(seq=seq, item=item) for seq, item in retraction.hidden],
    )


@router.post(
    "/{session_id}/reset", status_code=status.HTTP_201_CREATED, response_model=ResetResponse
)
def reset(session_id: str, tenant_id: TenantId, db: Db, now: Now) -> ResetResponse:
    """From here on the active history starts empty; the goal and world state stay."""
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    written = repository.append_facts(db, session=session, facts=[reset_fact()], recorded_at=now)
    db.commit()
    return ResetResponse(seq=written.facts[0].seq)
