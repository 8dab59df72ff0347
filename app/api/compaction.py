"""`/compact`, compaction advice and session end: load, plan in the core, call hooks, store.

A compaction is a projection: it appends one `contextd.compaction` fact whose `history` names
kept facts by seq and carries the items it wrote (invariants, the product, cleared outputs).
The raw log keeps every item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Response, status
from sqlalchemy.orm import Session

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.history import ActiveHistory, load_session_and_history
from app.api.isolation import append_conclusion
from app.api.json_body import JsonRoute
from app.api.models import (
    AdviceResponse,
    CompactRequest,
    CompactResponse,
    EndSessionRequest,
    EndSessionResponse,
    SessionHooks,
)
from app.domain.advice import advise
from app.domain.compaction import (
    CompactionInput,
    CompactionParams,
    CompactionResult,
    plan_compaction,
    render_summarization_prompt,
)
from app.domain.errors import Conflict, InvalidInput, SequenceConflict
from app.domain.formats import from_responses, to_responses
from app.domain.history import HistoryEntry
from app.domain.ids import derive_id
from app.domain.items import COMPACTION_FACT, OUTPUT_TYPES, Item, item_type
from app.domain.normalize import normalize_history
from app.domain.world_state import render_goal, render_section, section_layer
from app.hooks import HookResult, SummarizerUnavailable, call_hook, summarize_with_llm
from app.metrics import COMPACTION_FALLBACKS, COMPACTION_TOKENS_SAVED, COMPACTIONS, HOOK_CALLS
from app.settings import Settings
from app.storage import repository
from app.tokens import token_counter

router = APIRouter(route_class=JsonRoute, tags=["compaction"], responses=ERROR_RESPONSES)


def _session_entries(
    loaded: ActiveHistory, normalized: tuple[Item, ...]
) -> tuple[HistoryEntry, ...]:
    """Normalized items with the fact each one is. Unchanged items are the loaded objects
    themselves; a truncated output is matched to its fact by call_id, but is not verbatim."""
    by_identity = {id(item): seq for item, seq in zip(loaded.items, loaded.seqs, strict=True)}
    outputs = {
        (item_type(item), item.get("call_id")): seq
        for item, seq in zip(loaded.items, loaded.seqs, strict=True)
        if item_type(item) in OUTPUT_TYPES
    }
    entries = []
    for item in normalized:
        seq = by_identity.get(id(item))
        if seq is not None:
            entries.append(HistoryEntry(seq=seq, item=item, verbatim=True))
        else:
            matched = outputs.get((item_type(item), item.get("call_id")))
            entries.append(HistoryEntry(seq=matched, item=item, verbatim=False))
    return tuple(entries)


def _invariants(loaded: ActiveHistory) -> tuple[Item, ...]:
    """The current goal and governing sections, re-anchored at the top of a compacted history."""
    goal = (
        () if loaded.goal is None else (render_goal(loaded.goal.text, version=loaded.goal.version),)
    )
    state = loaded.world_state
    sections = tuple(
        render_section(section, value, version=state.version)
        for section, value in sorted(state.sections.items())
        if section_layer(section) == "prefix"
    )
    return goal + sections


def _summary_text(
    body: CompactRequest, inp: CompactionInput, *, settings: Settings
) -> tuple[str | None, dict[str, Any]]:
    """The narrative from the requested summarizer, and a report of which one was used."""
    requested = body.params.summarizer
    if requested == "client":
        if body.summary is None:
            if body.dry_run:
                return None, {"requested": "client", "used": None}
            raise InvalidInput(
                "summarizer 'client' needs `summary.text` (a dry run returns the prompt to use)",
                details=[{"loc": ["body", "summary"], "msg": "required for summarizer client"}],
            )
        return body.summary.text, {"requested": "client", "used": "client"}
    if requested == "llm" and body.strategy in ("summary", "handoff", "notes") and not body.dry_run:
        try:
            text = summarize_with_llm(render_summarization_prompt(inp), settings=settings)
        except SummarizerUnavailable as exc:
            return None, {"requested": "llm", "used": "builtin", "error": str(exc)}
        return text, {"requested": "llm", "used": "llm"}
    return None, {"requested": requested, "used": "builtin"}


def _respond(
    result: CompactionResult,
    *,
    body: CompactRequest,
    compaction_id: str | None,
    hooks: list[HookResult],
    summarizer: dict[str, Any],
    prompt: str | None,
) -> CompactResponse:
    output_format = body.output_format or body.format
    return CompactResponse(
        compaction_id=compaction_id,
        strategy=result.strategy,
        requested_strategy=body.strategy,
        declares=result.declares,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        summary=result.summary.as_dict() if result.summary else None,
        notes=result.notes.as_dict() if result.notes else None,
        working_set=[{"seq": seq, "reason": reason} for seq, reason in result.working_set],
        history=from_responses([e.item for e in result.history], output_format).items,
        loss_check={"missing": list(result.loss_missing), "fell_back": result.fell_back},
        hooks=[hook.as_dict() for hook in hooks],
        summarization_prompt=prompt,
        summarizer=summarizer,
        noop=result.is_noop,
        dry_run=body.dry_run,
    )


def _stored_entry(entry: HistoryEntry) -> dict[str, Any]:
    return {"seq": entry.seq} if entry.verbatim and entry.seq is not None else {"item": entry.item}


@router.post(
    "/compact",
    status_code=status.HTTP_201_CREATED,
    response_model=CompactResponse,
    responses={200: {"model": CompactResponse, "description": "Dry run, no-op or stateless."}},
)
def compact(
    body: CompactRequest, tenant_id: TenantId, db: Db, settings: AppSettings, response: Response
) -> CompactResponse:
    if (body.session_id is None) == (body.items is None):
        raise InvalidInput(
            "give either `session_id` or `items`, not both and not neither",
            details=[{"loc": ["body"], "msg": "exactly one of session_id, items is required"}],
        )
    loaded: ActiveHistory | None = None
    hooks_config = SessionHooks()
    if body.session_id is not None:
        session, loaded = load_session_and_history(
            db, tenant_id=tenant_id, session_id=body.session_id
        )
        hooks_config = SessionHooks.model_validate(session.attributes.get("hooks", {}))
        encoding = body.encoding or loaded.encoding
        count_tokens = token_counter(encoding)
        normalized = normalize_history(
            loaded.items, count_tokens=count_tokens, item_metadata=loaded.metadata
        ).items
        entries = _session_entries(loaded, normalized)
        goal = loaded.goal.text if loaded.goal else None
        invariants = _invariants(loaded)
    else:
        encoding = body.encoding or settings.default_encoding
        count_tokens = token_counter(encoding)
        items = to_responses(body.items or [], body.format).items
        normalized = normalize_history(items, count_tokens=count_tokens).items
        # Stateless: `seq` is the 1-based position in the normalized history.
        entries = tuple(HistoryEntry(seq=n, item=item) for n, item in enumerate(normalized, 1))
        goal = body.goal
        invariants = ()
    params = body.params
    inp = CompactionInput(
        history=entries,
        strategy=body.strategy,
        params=CompactionParams(
            keep_recent=params.keep_recent,
            clear_at_least_tokens=params.clear_at_least_tokens,
            exclude_tools=tuple(params.exclude_tools),
            clear_tool_inputs=params.clear_tool_inputs,
            target_tokens=params.target_tokens,
            summarizer=params.summarizer,
        ),
        goal=goal,
        invariants=invariants,
    )
    text, summarizer = _summary_text(body, inp, settings=settings)
    inp = replace(inp, summary_text=text)
    prompt = (
        render_summarization_prompt(inp) if body.dry_run and params.summarizer == "client" else None
    )
    result = plan_compaction(inp, count_tokens=count_tokens)
    writes = loaded is not None and not body.dry_run and not result.is_noop
    if not writes or loaded is None or body.session_id is None:
        response.status_code = status.HTTP_200_OK
        return _respond(
            result, body=body, compaction_id=None, hooks=[], summarizer=summarizer, prompt=prompt
        )
    hook = call_hook(
        str(hooks_config.pre_compact) if hooks_config.pre_compact else None,
        event="pre_compact",
        payload={
            "session_id": body.session_id,
            "strategy": result.strategy,
            "covered": list(result.covered) if result.covered else None,
            "declares": result.declares,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
        },
        fail_closed=hooks_config.failure_policy == "fail_closed",
        timeout=settings.hook_timeout_seconds,
    )
    HOOK_CALLS.labels("pre_compact", hook.outcome).inc()
    if hook.outcome in ("vetoed", "failed_closed"):
        raise Conflict(
            f"the pre_compact hook stopped the compaction ({hook.outcome}: {hook.detail})",
            details={"hooks": [hook.as_dict()]},
        )
    if hook.notes:
        result = plan_compaction(replace(inp, pinned_notes=hook.notes), count_tokens=count_tokens)
    compaction_id = _write_compaction(
        db, tenant_id=tenant_id, session_id=body.session_id, loaded=loaded, result=result, body=body
    )
    db.commit()
    COMPACTIONS.labels(result.strategy, "fallback" if result.fell_back else "requested").inc()
    if result.fell_back:
        COMPACTION_FALLBACKS.labels(body.strategy).inc()
    COMPACTION_TOKENS_SAVED.labels(result.strategy).inc(
        max(0, result.tokens_before - result.tokens_after)
    )
    return _respond(
        result,
        body=body,
        compaction_id=compaction_id,
        hooks=[hook],
        summarizer=summarizer,
        prompt=prompt,
    )


def _write_compaction(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    loaded: ActiveHistory,
    result: CompactionResult,
    body: CompactRequest,
) -> str:
    """Append the compaction fact, unless the session moved on while hooks ran (409)."""
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    if session.last_seq != loaded.last_seq:
        raise SequenceConflict(expected=loaded.last_seq, actual=session.last_seq)
    compaction_id = derive_id("cmp", tenant_id, session.id, session.last_seq + 1)
    record = {
        "type": COMPACTION_FACT,
        "compaction_id": compaction_id,
        "strategy": result.strategy,
        "requested_strategy": body.strategy,
        "covered": list(result.covered) if result.covered else None,
        "history": [_stored_entry(entry) for entry in result.history],
        "summary": result.summary.as_dict() if result.summary else None,
        "notes": result.notes.as_dict() if result.notes else None,
        "working_set": [list(pair) for pair in result.working_set],
        "loss_missing": list(result.loss_missing),
        "fell_back": result.fell_back,
    }
    repository.append_facts(
        db,
        session=session,
        facts=[
            repository.NewFact(
                type=COMPACTION_FACT,
                item=record,
                tokens=result.tokens_after,
                provenance={"harness_authored": True},
            )
        ],
        unit=None,
        phase=None,
        idempotency_key=None,
        expected_last_seq=None,
    )
    return compaction_id


@router.get("/sessions/{session_id}/compaction-advice", response_model=AdviceResponse)
def compaction_advice(
    session_id: str, tenant_id: TenantId, db: Db, settings: AppSettings
) -> AdviceResponse:
    _, loaded = load_session_and_history(db, tenant_id=tenant_id, session_id=session_id)
    normalized = normalize_history(
        loaded.items, count_tokens=token_counter(loaded.encoding), item_metadata=loaded.metadata
    ).items
    advice = session_advice(loaded, normalized, settings=settings)
    return AdviceResponse(**advice)


def session_advice(
    loaded: ActiveHistory,
    normalized: Sequence[Item],
    *,
    settings: Settings,
    sizes: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Compaction advice for an active history and its normalized items (also folded into
    session-mode `/assemble`); `sizes` are the items' token counts when the caller has them."""
    if sizes is None:
        sizes = loaded.token_counts(normalized, loaded.encoding)
    # A turn runs from one user message to the next: its tokens measure the growth rate.
    turns: list[int] = []
    for item, size in zip(normalized, sizes, strict=True):
        if (item_type(item) == "message" and item.get("role") == "user") or not turns:
            turns.append(0)
        turns[-1] += size
    advice = advise(
        active_tokens=sum(sizes),
        context_window=loaded.context_window,
        history=normalized,
        phases=loaded.phases,
        turn_tokens=turns,
        threshold=settings.compaction_pressure_threshold,
    )
    return advice.as_dict()


@router.post("/sessions/{session_id}/end", response_model=EndSessionResponse)
def end_session(
    session_id: str, body: EndSessionRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> EndSessionResponse:
    """Writes a final handoff of the session and fires its `session_end` hook."""
    session, loaded = load_session_and_history(db, tenant_id=tenant_id, session_id=session_id)
    hooks_config = SessionHooks.model_validate(session.attributes.get("hooks", {}))
    count_tokens = token_counter(loaded.encoding)
    normalized = normalize_history(
        loaded.items, count_tokens=count_tokens, item_metadata=loaded.metadata
    ).items
    request = CompactRequest(session_id=session_id, strategy="handoff")
    result = plan_compaction(
        CompactionInput(
            history=_session_entries(loaded, normalized),
            strategy="handoff",
            params=CompactionParams(),
            goal=loaded.goal.text if loaded.goal else None,
            invariants=_invariants(loaded),
        ),
        count_tokens=count_tokens,
    )
    compaction_id = None
    if not result.is_noop:
        compaction_id = _write_compaction(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            loaded=loaded,
            result=result,
            body=request,
        )
        db.commit()
    hook = call_hook(
        str(hooks_config.session_end) if hooks_config.session_end else None,
        event="session_end",
        payload={
            "session_id": session_id,
            "compaction_id": compaction_id,
            "handoff": [e.item for e in result.history],
        },
        fail_closed=False,
        timeout=settings.hook_timeout_seconds,
    )
    HOOK_CALLS.labels("session_end", hook.outcome).inc()
    conclusion_seq = None
    if body.conclusion is not None:
        conclusion_seq = append_conclusion(
            db,
            tenant_id=tenant_id,
            child_id=session_id,
            conclusion=body.conclusion,
            fmt=body.format,
            via="end",
        ).seq
    return EndSessionResponse(
        compaction_id=compaction_id, hooks=[hook.as_dict()], conclusion_seq=conclusion_seq
    )
