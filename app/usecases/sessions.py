"""Sessions and their log as the routes answer them: create one, read one whole, page through
its raw log. Appends are `app.usecases.append`'s, usage reports `app.usecases.usage`'s."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from app.contract.common import TokenizerBody
from app.contract.sessions import (
    CacheTermsBody,
    CompactionOptions,
    CreateSessionRequest,
    ItemsPageResponse,
    LoggedItem,
    SessionDetailResponse,
    SessionHooks,
    SessionResponse,
)
from app.domain.calibration import SessionWindow
from app.domain.errors import RuleBroken
from app.domain.ids import derive_id
from app.hooks import check_destinations
from app.settings import Settings
from app.storage import fact_log, session_rows
from app.storage.tables import SessionRow
from app.usecases.loaded_history import (
    load_history,
    session_cache_terms,
    session_watermarks,
    session_window,
)

__all__ = ["create_session", "items_page", "session_detail"]


def create_session(
    db: Session, *, tenant_id: int, body: CreateSessionRequest, settings: Settings
) -> tuple[SessionResponse, bool]:
    """`POST /sessions`: the session, created unless an identical one exists (`created`
    False); one of the same name with other attributes is a 409. Hook addresses outside the
    allowed networks are refused before anything is written."""
    check_destinations(
        body.hooks.model_dump(mode="json", exclude={"failure_policy"}),
        allowed=settings.hook_allowed_networks,
    )
    row, created = session_rows.create_session(
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
    return _session_response(row, session_window(settings, row)), created


def session_detail(
    db: Session, *, tenant_id: int, session_id: str, settings: Settings
) -> SessionDetailResponse:
    """`GET /sessions/{id}`: the session, its active history's size and its goal, world state
    and compactions."""
    row = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
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


def items_page(
    db: Session, *, tenant_id: int, session_id: str, after_seq: int, limit: int
) -> ItemsPageResponse:
    """`GET /sessions/{id}/items`: up to `limit` facts of the raw log after `after_seq`, each as
    it was appended."""
    row = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    facts = fact_log.read_facts(db, session_id=row.id, after_seq=after_seq, limit=limit + 1)
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


def _original(seq: int, stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """A later part of a message names the seq holding the message (see `facts.client_batch`)."""
    if stored is None or "part" not in stored:
        return stored
    return {**stored, "message_seq": seq - stored["part"]}
