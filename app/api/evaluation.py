"""`POST /sessions/{id}/evaluate` and its jobs over HTTP: `app.usecases.evaluate` replays a
session's logged turns under variants of its settings on a scratch store, at once or as a job
(`app.usecases.evaluation_jobs`). Writes nothing but a job's own row."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response, status

from app.api.deps import AppSettings, Db, EvaluationJobs, Now, TenantId
from app.api.errors import ERROR_RESPONSES, ErrorResponse, rule_responses
from app.api.json_body import JsonRoute
from app.api.responses import json_response
from app.contract.evaluation import EvaluateRequest, EvaluateResponse, EvaluationJobResponse
from app.usecases import evaluation_jobs as jobs

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)
job_router = APIRouter(
    route_class=JsonRoute, prefix="/evaluations", tags=["sessions"], responses=ERROR_RESPONSES
)


@router.post(
    "/{session_id}/evaluate",
    response_model=EvaluateResponse,
    responses={
        **rule_responses("variant_names", "watermarks_out_of_order"),
        202: {
            "model": EvaluationJobResponse,
            "description": "Run as a job: more than `CTX_EVALUATE_SYNC_CALLS` calls to replay, or "
            "`Prefer: respond-async`. `Location` names the job.",
        },
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
    session_id: str,
    body: EvaluateRequest,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    runner: EvaluationJobs,
    now: Now,
    prefer: Annotated[str | None, Header()] = None,
) -> Response:
    """Replays the session's logged turns as a runtime would (append, assemble, compact when
    advised) under its own settings (`current`, first) and under each variant, on a scratch
    store: what each would have cost (reuse, fresh tokens, cost in the session's cache terms,
    compactions) and shown (goal, pairing, over-budget calls, next-action grounding). Writes
    nothing to the session, its plans or the metrics; the same log and variants give the same
    answer. A long one (or one asked with `Prefer: respond-async`) is a job: 202, and
    `GET /evaluations/{id}` follows it."""
    answered, answer = jobs.start_or_run(
        db,
        tenant_id=tenant_id,
        session_id=session_id,
        body=body,
        settings=settings,
        runner=runner,
        respond_async="respond-async" in (prefer or "").lower(),
        now=now,
    )
    if answered:
        return json_response(EvaluateResponse.model_validate(answer).model_dump(mode="json"))
    started = json_response(
        EvaluationJobResponse.model_validate(answer).model_dump(mode="json"),
        status_code=status.HTTP_202_ACCEPTED,
    )
    started.headers["Location"] = f"/evaluations/{answer['evaluation_id']}"
    return started


@job_router.get("/{evaluation_id}", response_model=EvaluationJobResponse)
def get_evaluation(
    evaluation_id: str, tenant_id: TenantId, db: Db, settings: AppSettings, now: Now
) -> EvaluationJobResponse:
    """Where the evaluation job stands: `running` with its progress, `done` with its result,
    `failed` saying why (a job lost with its process says so), or `cancelled`."""
    return EvaluationJobResponse.model_validate(
        jobs.job(db, tenant_id=tenant_id, evaluation_id=evaluation_id, settings=settings, now=now)
    )


@job_router.delete("/{evaluation_id}", response_model=EvaluationJobResponse)
def cancel_evaluation(
    evaluation_id: str, tenant_id: TenantId, db: Db, settings: AppSettings, now: Now
) -> EvaluationJobResponse:
    """Cancels the evaluation job if it is running (it stops at the call it is on); answers
    where it stands either way."""
    return EvaluationJobResponse.model_validate(
        jobs.cancel(
            db, tenant_id=tenant_id, evaluation_id=evaluation_id, settings=settings, now=now
        )
    )
