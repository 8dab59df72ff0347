"""`POST /sessions/{id}/evaluate` over HTTP: `app.usecases.evaluate` replays a session's logged
turns under variants of its settings on a scratch store. Writes nothing."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES, ErrorResponse, rule_responses
from app.api.json_body import JsonRoute
from app.contract.evaluation import EvaluateRequest, EvaluateResponse
from app.usecases import evaluate as evaluating

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)


@router.post(
    "/{session_id}/evaluate",
    response_model=EvaluateResponse,
    responses={
        **rule_responses("variant_names", "watermarks_out_of_order"),
        413: {
            "model": ErrorResponse,
            "description": "The session holds more facts than `CTX_EVALUATE_MAX_FACTS`, or the "
            "variants would replay more calls than `CTX_EVALUATE_MAX_CALLS` (`payload_too_large`)"
            "; nothing was replayed.",
        },
        429: {
            "model": ErrorResponse,
            "description": "The tenant has `CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT` evaluations "
            "under way already (`tenant_busy`); retry after the given seconds.",
        },
    },
)
def evaluate(
    session_id: str, body: EvaluateRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> EvaluateResponse:
    """Replays the session's logged turns as a runtime would (append, assemble, compact when
    advised) under its own settings (`current`, first) and under each variant, on a scratch
    store: what each would have cost (reuse, fresh tokens, cost in the session's cache terms,
    compactions) and shown (goal, pairing, over-budget calls, next-action grounding). Writes
    nothing to the session, its plans or the metrics; the same log and variants give the same
    answer."""
    return EvaluateResponse.model_validate(
        evaluating.evaluate(
            db, tenant_id=tenant_id, session_id=session_id, body=body, settings=settings
        )
    )
