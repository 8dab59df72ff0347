"""What the routes say of a session's history against its window: the compaction advice for
its next call, and the active context's size by source class."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.contract.common import TokenizerBody
from app.contract.compaction import AdviceResponse, ContextWindowResponse
from app.domain.assemble import HISTORY_SOURCE
from app.settings import Settings
from app.storage import cache_outcomes, session_rows
from app.usecases.loaded_history import cache_standing, load_history, session_window

__all__ = ["compaction_advice", "context_window"]


def compaction_advice(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    settings: Settings,
    now: datetime,
    unit: str | None,
) -> AdviceResponse:
    """`GET /sessions/{id}/compaction-advice`: the advice for the session's next call, made
    `now` in the lineage of `unit` (default: the session's own), priced by that lineage's
    prompt cache."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    window = session_window(settings, session)
    previous = cache_outcomes.last_call_at(
        db, tenant_id=session.tenant_id, session_key=session.id, unit=unit or session.unit or ""
    )
    cache = cache_standing(session, window, now=now, previous_call_at=previous)
    advice = load_history(db, session).advice(window, cache)
    tokenizer = window.tokenizer
    return AdviceResponse(
        **advice.as_dict(),
        active_tokens=advice.active_tokens,
        provider_tokens_estimate=tokenizer.provider_tokens(advice.active_tokens),
        tokenizer=TokenizerBody.model_validate(tokenizer.as_dict()),
    )


def context_window(
    db: Session, *, tenant_id: int, session_id: str, settings: Settings
) -> ContextWindowResponse:
    """`GET /sessions/{id}/context-window`: the active context (what session-mode assembly pins
    and fits) against the window."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
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
