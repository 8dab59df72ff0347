"""`/compact`, compaction advice, the context window and session end over HTTP: the writes go
through `app.usecases.compact`; the reads weigh the loaded history against the session's window.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import AppSettings, Db, Hooks, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.compaction import (
    AdviceResponse,
    CompactRequest,
    CompactResponse,
    ContextWindowResponse,
    EndSessionRequest,
    EndSessionResponse,
)
from app.usecases import advice as advising
from app.usecases import compact as compaction

router = APIRouter(route_class=JsonRoute, tags=["compaction"], responses=ERROR_RESPONSES)


@router.post(
    "/compact",
    status_code=status.HTTP_201_CREATED,
    response_model=CompactResponse,
    responses={
        200: {"model": CompactResponse, "description": "Dry run, no-op or stateless."},
        **rule_responses("unstorable_value"),
    },
)
def compact(
    body: CompactRequest,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    hook_caller: Hooks,
    response: Response,
    now: Now,
) -> CompactResponse:
    answer = compaction.compact(
        db, tenant_id=tenant_id, body=body, settings=settings, hook_caller=hook_caller, now=now
    )
    if not answer.applied:
        response.status_code = status.HTTP_200_OK
    return answer


@router.get("/sessions/{session_id}/compaction-advice", response_model=AdviceResponse)
def compaction_advice(
    session_id: str,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    now: Now,
    unit: Annotated[
        str | None,
        Query(
            max_length=200,
            description="The lineage whose prompt cache prices the advice (default: the "
            "session's unit).",
        ),
    ] = None,
) -> AdviceResponse:
    return advising.compaction_advice(
        db, tenant_id=tenant_id, session_id=session_id, settings=settings, now=now, unit=unit
    )


@router.get("/sessions/{session_id}/context-window", response_model=ContextWindowResponse)
def context_window(
    session_id: str, tenant_id: TenantId, db: Db, settings: AppSettings
) -> ContextWindowResponse:
    """The active context (what session-mode assembly pins and fits) against the window."""
    return advising.context_window(
        db, tenant_id=tenant_id, session_id=session_id, settings=settings
    )


@router.post(
    "/sessions/{session_id}/end",
    response_model=EndSessionResponse,
    responses=rule_responses("conclusion_not_one_item", "reserved_item_type", "unstorable_value"),
)
def end_session(
    session_id: str,
    body: EndSessionRequest,
    tenant_id: TenantId,
    db: Db,
    hook_caller: Hooks,
    now: Now,
) -> EndSessionResponse:
    """Writes a final handoff of the session and fires its `session_end` hook. A `conclusion`
    from a session without a parent is a 409 `not_a_child_session`."""
    return compaction.end_session(
        db,
        tenant_id=tenant_id,
        session_id=session_id,
        body=body,
        hook_caller=hook_caller,
        now=now,
    )
