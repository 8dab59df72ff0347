"""Sessions and the fact log: create, inspect, append, page through the raw log; provider usage
(and, for a named assembly, its predicted prompt-cache reuse against the provider's count)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.api.responses import AnswerThenFinish, json_response
from app.contract.common import MAX_SEQ
from app.contract.sessions import (
    AppendRequest,
    AppendResponse,
    CreateSessionRequest,
    ItemsPageResponse,
    SessionDetailResponse,
    SessionResponse,
    UsageRequest,
)
from app.domain.json_encoding import encode_json
from app.usecases import append as appending
from app.usecases import sessions, usage

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionResponse,
    responses={
        200: {"model": SessionResponse, "description": "Existing, identical session."},
        **rule_responses("watermarks_out_of_order", "hook_address_refused", "unstorable_value"),
    },
)
def create_session(
    body: CreateSessionRequest,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    response: Response,
) -> SessionResponse:
    answer, created = sessions.create_session(db, tenant_id=tenant_id, body=body, settings=settings)
    if not created:
        response.status_code = status.HTTP_200_OK
    return answer


@router.get("/{session_id}", response_model=SessionDetailResponse)
def get_session(
    session_id: str, tenant_id: TenantId, db: Db, settings: AppSettings
) -> SessionDetailResponse:
    return sessions.session_detail(
        db, tenant_id=tenant_id, session_id=session_id, settings=settings
    )


@router.post(
    "/{session_id}/items",
    status_code=status.HTTP_201_CREATED,
    response_model=AppendResponse,
    responses={
        200: {"model": AppendResponse, "description": "Idempotent replay; nothing written."},
        **rule_responses(
            "too_many_items",
            "reserved_item_type",
            "unstorable_value",
            "idempotency_mismatch",
            "malformed_item",
        ),
    },
)
async def append_items(
    session_id: str, body: AppendRequest, tenant_id: TenantId, request: Request
) -> Response:
    """Appends the items to the log. When they hold the model's output after a session-mode
    assembly, that assembly is graded against it after the answer (`grade_next_action`)."""
    # A small batch on PostgreSQL is appended with no worker thread (`append_without_a_thread`).
    # What the app holds is read from its state here: as dependencies, FastAPI would solve each
    # one on every append (`docs/performance.md`).
    state = request.app.state
    appended = await appending.append_without_a_thread(
        state.loop_pool,
        state.session_factory,
        tenant_id=tenant_id,
        session_id=session_id,
        body=body,
        body_bytes=len(await request.body()),
        settings=state.settings,
        now=state.clock(),
    )
    code = status.HTTP_200_OK if appended.replayed else status.HTTP_201_CREATED
    # A response, not the model: FastAPI would validate the model again.
    if appended.after_answer is None:
        return json_response(appended.answer.model_dump(mode="json"), status_code=code)
    return AnswerThenFinish(
        encode_json(appended.answer.model_dump(mode="json")),
        finish=appended.after_answer,
        status_code=code,
    )


@router.get("/{session_id}/items", response_model=ItemsPageResponse)
def list_items(
    session_id: str,
    tenant_id: TenantId,
    db: Db,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ItemsPageResponse:
    return sessions.items_page(
        db, tenant_id=tenant_id, session_id=session_id, after_seq=after_seq, limit=limit
    )


@router.post(
    "/{session_id}/usage",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses=rule_responses("unstorable_value"),
)
def report_usage(
    session_id: str, body: UsageRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> Response:
    """Provider-reported usage, folded into the cache-status axis of the cost metrics. With an
    `assembly_id`, that assembly's predicted reused prefix is counted against the provider's
    cached tokens too, under the call's unit and phase, else the assembly's; and its
    `input_tokens` calibrate the session's model of provider tokens (an overhead and a ratio
    per encoding token), once per assembly (see the session's `tokenizer`). An assembly made
    for another session, or for none, is a 409 `assembly_of_another_session`."""
    usage.report_usage(db, tenant_id=tenant_id, session_id=session_id, body=body, settings=settings)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
