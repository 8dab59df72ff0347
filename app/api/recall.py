"""`POST /sessions/{id}/recall` over HTTP: `app.usecases.recall` reads a fact back in windows,
or searches the log. Writes nothing."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES, ErrorResponse, rule_responses
from app.api.json_body import JsonRoute
from app.contract.recall import RecallRequest, RecallResponse
from app.usecases import recall as recalling

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)


@router.post(
    "/{session_id}/recall",
    response_model=RecallResponse,
    responses={
        **rule_responses("seq_range_reversed", "invalid_pattern"),
        429: {
            "model": ErrorResponse,
            "description": "The tenant has `CTX_RECALL_MAX_CONCURRENT_PER_TENANT` searches under"
            " way already (`tenant_busy`); retry after the given seconds.",
        },
    },
)
def recall(
    session_id: str, body: RecallRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> RecallResponse:
    """Reads fact `seq` back in a window of whole lines, or lists the lines matching `pattern`
    in one fact or a seq range. Bounds beyond the service's caps are capped, and the answer
    states the bounds applied. A seq past the log, or a window past the fact's text, is a 409
    (`seq_past_log`, `window_past_text`): the session is there. A search stops at its bounds
    (matches, bytes given to the pattern, CPU seconds) and says which, and the fact and line to
    go on from; a tenant's searches under way at once are bounded (429)."""
    return recalling.recall(
        db, tenant_id=tenant_id, session_id=session_id, body=body, settings=settings
    )
