"""`/assemble`, stored plans and replay over HTTP: each handler maps its request to the use case
in `app.usecases.assemble` and the answer back.

An assembly's answer is sent as the use case built it, then the work after it runs (the cost
metrics, the plan's write on PostgreSQL) before the connection takes its next request.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Response, status

from app.api.deps import AppSettings, Db, JsonBody, Now, RawBody, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.api.responses import AnswerThenFinish, json_response
from app.contract.assembly import (
    AssembleRequest,
    AssembleResponse,
    ReplayRequest,
    ReplayResponse,
    StoredAssemblyResponse,
)
from app.domain.json_encoding import decode_json, encode_json
from app.metrics import ASSEMBLY_LATENCY
from app.tracing import exemplar
from app.usecases import assemble as assembly
from app.usecases.plan_record import ReceivedRequest

router = APIRouter(route_class=JsonRoute, tags=["assembly"], responses=ERROR_RESPONSES)


@router.post(
    "/assemble",
    status_code=status.HTTP_201_CREATED,
    response_model=AssembleResponse,
    responses=rule_responses("duplicate_candidate_ids", "unstorable_value"),
)
def assemble(
    body: AssembleRequest,
    raw: RawBody,
    parsed: JsonBody,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    now: Now,
) -> Response:
    """Selects, places and accounts one context, and stores its plan under `assembly_id`
    (see `app.storage.plans` for when the plan is written). The cost metrics are recorded just
    after the response is sent, before the connection takes its next request. A `role` the
    stored `manifest` has no view for is a 409 `role_not_in_manifest`."""
    started = time.perf_counter()
    # The value the model was checked from; parsed again only if the route kept none.
    value = parsed if isinstance(parsed, dict) else decode_json(raw)
    received = ReceivedRequest(body=raw, value=value)
    stored = assembly.assemble(
        db, tenant_id=tenant_id, request=body, received=received, settings=settings, now=now
    )
    ASSEMBLY_LATENCY.observe(
        time.perf_counter() - started, exemplar=exemplar(assembly_id=stored.assembly_id)
    )
    return AnswerThenFinish(
        encode_json(stored.answer),
        finish=stored.after_answer,
        status_code=status.HTTP_201_CREATED,
    )


@router.get("/assemblies/{assembly_id}", response_model=StoredAssemblyResponse)
def get_assembly(assembly_id: str, tenant_id: TenantId, db: Db) -> Response:
    return json_response(assembly.stored_assembly(db, tenant_id=tenant_id, assembly_id=assembly_id))


@router.post(
    "/assemblies/{assembly_id}/replay",
    status_code=status.HTTP_201_CREATED,
    response_model=ReplayResponse,
    responses=rule_responses("duplicate_candidate_ids", "unstorable_value"),
)
def replay_assembly(
    assembly_id: str,
    body: ReplayRequest,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    now: Now,
) -> ReplayResponse:
    return assembly.replay(
        db, tenant_id=tenant_id, assembly_id=assembly_id, request=body, settings=settings, now=now
    )
