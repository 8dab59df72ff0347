"""`/compact`, compaction advice, the context window and session end over HTTP: the writes go
through `app.usecases.compact`; the reads weigh the loaded history against the session's window.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from app.api.deps import AppSettings, Db, Hooks, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.common import TokenizerBody
from app.contract.compaction import (
    AdviceResponse,
    CompactRequest,
    CompactResponse,
    ContextWindowResponse,
    EndSessionRequest,
    EndSessionResponse,
)
from app.domain.assemble import HISTORY_SOURCE
from app.storage import repository
from app.usecases import compact as compaction
from app.usecases.history import advice_now, load_history, session_window

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
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    advice, window = advice_now(db, session, settings, now=now, unit=unit)
    tokenizer = window.tokenizer
    return AdviceResponse(
        **advice.as_dict(),
        active_tokens=advice.active_tokens,
        provider_tokens_estimate=tokenizer.provider_tokens(advice.active_tokens),
        tokenizer=TokenizerBody.model_validate(tokenizer.as_dict()),
    )


@router.get("/sessions/{session_id}/context-window", response_model=ContextWindowResponse)
def context_window(
    session_id: str, tenant_id: TenantId, db: Db, settings: AppSettings
) -> ContextWindowResponse:
    """The active context (what session-mode assembly pins and fits) against the window."""
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    window = session_window(settings, session)
    loaded = load_history(db, session)
    advice = loaded.advice(window)
    tokenizer = window.tokenizer
    return ContextWindowResponse(
        session_id=session_id,
        context_window=session.context_window,
        usable_window=window.usable,
        window_tokens=window.tokens,
        active_tokens=advice.active_tokens,
        provider_tokens_estimate=tokenizer.provider_tokens(advice.active_tokens),
        by_source_class={
            HISTORY_SOURCE: advice.active_tokens - loaded.pinned_tokens(window),
            **loaded.pinned_by_source_class(window),
        },
        pressure=advice.pressure,
        tokenizer=TokenizerBody.model_validate(tokenizer.as_dict()),
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
