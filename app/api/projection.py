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
    RetractionRequest,
    RetractionResponse,
)
from app.usecases import projection

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
    return projection.retract(db, tenant_id=tenant_id, session_id=session_id, seq=body.seq, now=now)


@router.post(
    "/{session_id}/reset", status_code=status.HTTP_201_CREATED, response_model=ResetResponse
)
def reset(session_id: str, tenant_id: TenantId, db: Db, now: Now) -> ResetResponse:
    """From here on the active history starts empty; the goal and world state stay."""
    return projection.reset(db, tenant_id=tenant_id, session_id=session_id, now=now)
