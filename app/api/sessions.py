"""Sessions and the fact log: create, inspect, append, page through the raw log; provider usage
(and, for a named assembly, its predicted prompt-cache reuse against the provider's count)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.api.responses import AnswerThenFinish, json_response
from app.contract.common import MAX_SEQ, TokenizerBody
from app.contract.sessions import (
    AppendRequest,
    AppendResponse,
    CacheTermsBody,
    CompactionOptions,
    CreateSessionRequest,
    ItemsPageResponse,
    LoggedItem,
    SessionDetailResponse,
    SessionHooks,
    SessionResponse,
    UsageRequest,
)
from app.domain.calibration import SessionWindow
from app.domain.errors import RuleBroken
from app.domain.ids import derive_id
from app.domain.json_encoding import encode_json
from app.hooks import check_destinations
from app.settings import Settings
from app.storage import repository
from app.storage.tables import SessionRow
from app.usecases import append as appending
from app.usecases import usage
from app.usecases.history import (
    load_history,
    session_cache_terms,
    session_watermarks,
    session_window,
)

router = APIRouter(
    route_class=JsonRoute, prefix="/sessions", tags=["sessions"], responses=ERROR_RESPONSES
)


def _session_response(row: SessionRow, window: SessionWindow) -> SessionResponse:
    watermarks = window.watermarks
    return SessionResponse(
        session_id=row.external_id or "",
        encoding=row.encoding,
        context_window=row.context_window,
        usable_window=window.usable,
        model=row.model,
        metadata=row.attributes["metadata"],
        hooks=SessionHooks.model_validate(row.attributes["hooks"]),
        compaction=CompactionOptions(high_watermark=watermarks.high, low_watermark=watermarks.low),
        cache=CacheTermsBody.model_validate(asdict(session_cache_terms(row, window))),
        recall_tool=row.attributes.get("recall_tool", True),
        tokenizer=TokenizerBody.model_validate(window.tokenizer.as_dict()),
        created_at=row.created_at,
        last_seq=row.last_seq,
    )


def _compaction_options(body: CreateSessionRequest, settings: Settings) -> dict[str, float]:
    """The session's own watermarks, as stored (only those it sets); 422 when they would be
    inverted against the service's."""
    options = body.compaction.model_dump(exclude_none=True)
    try:
        session_watermarks(settings, options)
    except ValueError as exc:
        raise RuleBroken(
            "watermarks_out_of_order",
            str(exc),
            details=[{"loc": ["body", "compaction"], "msg": str(exc)}],
        ) from exc
    return options


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
    check_destinations(
        body.hooks.model_dump(mode="json", exclude={"failure_policy"}),
        allowed=settings.hook_allowed_networks,
    )
    row, created = repository.create_session(
        db,
        tenant_id=tenant_id,
        external_id=body.session_id,
        encoding=body.encoding or settings.default_encoding,
        context_window=body.context_window or settings.default_context_window,
        model=body.model,
        attributes={
            "metadata": body.metadata,
            "hooks": body.hooks.model_dump(mode="json"),
            # Only when set: sessions created before the option compare equal as they were.
            **({"compaction": options} if (options := _compaction_options(body, settings)) else {}),
            **({} if body.recall_tool else {"recall_tool": False}),
            **({"cache": cache} if (cache := body.cache.model_dump(exclude_none=True)) else {}),
        },
        derive_id=lambda internal_id: derive_id("sess", tenant_id, internal_id),
    )
    db.commit()
    if not created:
        response.status_code = status.HTTP_200_OK
    return _session_response(row, session_window(settings, row))


@router.get("/{session_id}", response_model=SessionDetailResponse)
def get_session(
    session_id: str, tenant_id: TenantId, db: Db, settings: AppSettings
) -> SessionDetailResponse:
    row = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    loaded = load_history(db, row)
    goal = loaded.active.goal
    window = session_window(settings, row)
    return SessionDetailResponse(
        **_session_response(row, window).model_dump(),
        item_count=row.last_seq,
        active_tokens=loaded.tokens,
        provider_tokens_estimate=window.tokenizer.provider_tokens(loaded.tokens),
        goal={"version": goal.version, "text": goal.text} if goal else None,
        world_state_version=loaded.active.world_state.version,
        compactions=loaded.active.compactions,
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


def _original(seq: int, stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """A later part of a message names the seq holding the message (see `facts.client_batch`)."""
    if stored is None or "part" not in stored:
        return stored
    return {**stored, "message_seq": seq - stored["part"]}


@router.get("/{session_id}/items", response_model=ItemsPageResponse)
def list_items(
    session_id: str,
    tenant_id: TenantId,
    db: Db,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ItemsPageResponse:
    row = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    facts = repository.read_facts(db, session_id=row.id, after_seq=after_seq, limit=limit + 1)
    page = facts[:limit]
    return ItemsPageResponse(
        items=[
            LoggedItem(
                seq=fact.seq,
                item=fact.item,
                type=fact.type,
                recorded_at=fact.recorded_at,
                unit=fact.unit,
                phase=fact.phase,
                tokens=fact.tokens,
                metadata=fact.provenance,
                original=_original(fact.seq, fact.original),
                timeline=fact.timeline,
            )
            for fact in page
        ],
        next_after_seq=page[-1].seq if len(facts) > limit else None,
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
