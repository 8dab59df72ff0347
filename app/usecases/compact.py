"""Compaction and session end: load, plan in the core, call hooks, store.

A compaction is a projection: it appends one `contextd.compaction` fact (see `app.domain.facts`)
and the raw log keeps every item. The plan is made before any summarizer or hook is called, so
a no-op, a dry run or a stateless call never reaches out; and no transaction is open while one
runs, so a slow endpoint holds no connection (what is written after it is re-checked under the
session's lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import anyio
from sqlalchemy.orm import Session

from app.contract.compaction import (
    CompactedIdentifiers,
    CompactParams,
    CompactRequest,
    CompactResponse,
    EndSessionRequest,
    EndSessionResponse,
    LostIdentifier,
)
from app.contract.sessions import SessionHooks
from app.domain.advice import GRADED_CALLS, keeps_needing_what_was_hidden
from app.domain.calibration import SessionWindow
from app.domain.compaction import (
    PRODUCT_STRATEGIES,
    CompactionInput,
    CompactionParams,
    CompactionResult,
    NotAppliedReason,
    Strategy,
    plan_compaction,
    render_summarization_prompt,
)
from app.domain.errors import Conflict, InvalidInput
from app.domain.facts import compaction_fact
from app.domain.formats import from_responses, to_responses
from app.domain.history import HistoryEntry
from app.domain.ids import derive_id
from app.domain.items import CountTokens, item_tokens
from app.domain.normalize import normalize_history
from app.domain.world_state import invariant_items
from app.hooks import HookCaller, HookResult, SummarizerUnavailable, summarize_with_llm
from app.metrics import record_compaction, record_hook
from app.settings import Settings
from app.storage import fact_log, groundings, session_rows
from app.tokens import token_counter
from app.tracing import annotate, stage
from app.usecases.isolation import conclude
from app.usecases.loaded_history import LoadedHistory, load_history, session_window

__all__ = ["compact", "end_session"]


def compact(
    db: Session,
    *,
    tenant_id: int,
    body: CompactRequest,
    settings: Settings,
    hook_caller: HookCaller,
    now: datetime,
) -> CompactResponse:
    """`POST /compact`: the plan, made before any summarizer or hook is called; written (and
    `applied`, recorded `now`) unless it is a dry run, a no-op, stateless or frees too little."""
    with stage("compact"):
        response = _compact(
            db, tenant_id=tenant_id, body=body, settings=settings, hook_caller=hook_caller, now=now
        )
        annotate(
            lambda: {
                "gen_ai.conversation.id": body.session_id,
                "contextd.compaction.requested_strategy": body.strategy,
                "contextd.compaction.strategy": response.strategy,
                "contextd.compaction.applied": response.applied,
                "contextd.tokens.before": response.tokens_before,
                "contextd.tokens.after": response.tokens_after,
            }
        )
        return response


@dataclass(frozen=True)
class _Read:
    """What a compaction plans from: its input, counted how, and for a session its history,
    window and hooks (None and the defaults when stateless)."""

    inp: CompactionInput
    count_tokens: CountTokens
    loaded: LoadedHistory | None = None
    window: SessionWindow | None = None
    hooks: SessionHooks = field(default_factory=SessionHooks)


@dataclass(frozen=True)
class _Planned:
    """The compaction planned: the input it ended with (a fallback strategy, a summarizer's
    narrative), its result, why it is not applied (None: it is), the strategy the advice would
    take instead, and which summarizer wrote it."""

    inp: CompactionInput
    result: CompactionResult
    reason: NotAppliedReason | None
    recommended: Strategy | None
    summarizer: dict[str, Any]


def _compact(
    db: Session,
    *,
    tenant_id: int,
    body: CompactRequest,
    settings: Settings,
    hook_caller: HookCaller,
    now: datetime,
) -> CompactResponse:
    if (body.session_id is None) == (body.items is None):
        raise InvalidInput(
            "give either `session_id` or `items`, not both and not neither",
            details=[{"loc": ["body"], "msg": "exactly one of session_id, items is required"}],
        )
    summary_text, summarizer = _client_summary(body)
    read = _read(db, tenant_id=tenant_id, body=body, settings=settings, summary_text=summary_text)
    planned = _plan(read, body=body, settings=settings, summarizer=summarizer)
    client_prompt = body.dry_run and body.params.summarizer == "client"
    prompt = render_summarization_prompt(planned.inp) if client_prompt else None
    respond = partial(
        _respond,
        body=body,
        summarizer=planned.summarizer,
        prompt=prompt,
        goal=planned.inp.goal,
        recommended=planned.recommended,
    )
    if planned.reason is not None or read.loaded is None or body.session_id is None:
        return respond(planned.result, not_applied_because=planned.reason)
    hook = _pre_compact(
        read.hooks,
        hook_caller=hook_caller,
        tenant_id=tenant_id,
        session_id=body.session_id,
        result=planned.result,
    )
    result = planned.result
    if hook.notes:
        result = plan_compaction(
            replace(planned.inp, pinned_notes=hook.notes), count_tokens=read.count_tokens
        )
    compaction_id = _append_compaction(
        db,
        tenant_id=tenant_id,
        session_id=body.session_id,
        expected_last_seq=read.loaded.active.last_seq,
        result=result,
        requested_strategy=body.strategy,
        now=now,
    )
    db.commit()
    record_compaction(
        strategy=result.strategy,
        requested_strategy=body.strategy,
        fell_back=result.fell_back,
        tokens_saved=result.tokens_before - result.tokens_after,
    )
    return respond(result, compaction_id=compaction_id, hooks=(hook.as_dict(),))


def _append_compaction(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    expected_last_seq: int,
    result: CompactionResult,
    requested_strategy: str,
    now: datetime,
) -> str:
    """The compaction's fact appended under the session's lock, recorded `now`, and its id
    (derived from the session and the seq it takes); unless the session moved on since the
    compacted history was read (`SequenceConflict`, nothing written)."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    compaction_id = derive_id("cmp", tenant_id, session.id, session.last_seq + 1)
    fact = compaction_fact(
        result, compaction_id=compaction_id, requested_strategy=requested_strategy
    )
    fact_log.append_facts(
        db, session=session, facts=[fact], expected_last_seq=expected_last_seq, recorded_at=now
    )
    return compaction_id


def _read(
    db: Session,
    *,
    tenant_id: int,
    body: CompactRequest,
    settings: Settings,
    summary_text: str | None,
) -> _Read:
    """What the plan reads: the session's history (its target, unless given, from the low
    watermark and the grades of its recent calls; the transaction ended once read, so that no
    connection is held while a summarizer or a hook runs: the append locks and re-checks), or
    the items given; a `client` summarizer's narrative is `summary_text`."""
    params = _params(body.params)
    if body.session_id is None:
        count_tokens = token_counter(body.encoding or settings.default_encoding)
        inp = _stateless_input(body, params=params, count_tokens=count_tokens)
        return _Read(replace(inp, summary_text=summary_text), count_tokens)
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=body.session_id)
    hooks = SessionHooks.model_validate(session.attributes.get("hooks", {}))
    loaded = load_history(db, session, encoding=body.encoding)
    window = session_window(settings, session)
    if params.target_tokens is None:
        graded = groundings.recent_groundings(
            db, tenant_id=tenant_id, session_pk=session.id, limit=GRADED_CALLS
        )
        target = _low_watermark_target(loaded, window, groundings=graded)
        params = replace(params, target_tokens=target)
    inp = _session_input(loaded, strategy=body.strategy, params=params)
    db.commit()
    return _Read(
        replace(inp, summary_text=summary_text),
        token_counter(loaded.encoding),
        loaded=loaded,
        window=window,
        hooks=hooks,
    )


def _plan(
    read: _Read, *, body: CompactRequest, settings: Settings, summarizer: dict[str, Any]
) -> _Planned:
    """The compaction planned before any hook runs: with the strategy the advice recommends
    instead when the one asked for frees too little (and `fallback` allows it), and with the
    `llm` summarizer's narrative when it is asked for and there is something to summarize."""
    min_gain = settings.compaction_min_gain
    stateless = read.loaded is None
    inp = read.inp
    result = plan_compaction(inp, count_tokens=read.count_tokens)
    reason = _not_applied(body, result, stateless=stateless, min_gain=min_gain)
    recommended = None
    if (
        read.loaded is not None
        and read.window is not None
        and (result.is_noop or not result.frees_at_least(min_gain))
    ):
        advised = read.loaded.advice(read.window).recommended_strategy
        if advised is not None and advised != body.strategy:
            recommended = advised
            if body.fallback:
                # A runtime told to use one strategy would otherwise post it again on every
                # step while the pressure stays (and the service cuts the history instead).
                inp = replace(inp, strategy=advised)
                result = plan_compaction(inp, count_tokens=read.count_tokens)
                reason = _not_applied(body, result, stateless=False, min_gain=min_gain)
    llm = body.params.summarizer == "llm"
    if llm and reason in ("noop", "too_little_gain"):
        summarizer["used"] = None  # nothing worth summarizing: the summarizer is not called
    elif llm and inp.strategy in PRODUCT_STRATEGIES and not body.dry_run:
        inp, summarizer = _with_llm_summary(inp, settings=settings)
        result = plan_compaction(inp, count_tokens=read.count_tokens)
        reason = _not_applied(body, result, stateless=stateless, min_gain=min_gain)
    return _Planned(inp, result, reason, recommended, summarizer)


def end_session(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    body: EndSessionRequest,
    hook_caller: HookCaller,
    now: datetime,
) -> EndSessionResponse:
    """Writes a final handoff of the session (recorded `now`) and fires its `session_end`
    hook. A `conclusion` from a session without a parent is a 409 `not_a_child_session`."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    loaded = load_history(db, session)
    hooks = SessionHooks.model_validate(session.attributes.get("hooks", {}))
    inp = _session_input(loaded, strategy="handoff", params=CompactionParams())
    result = plan_compaction(inp, count_tokens=token_counter(loaded.encoding))
    compaction_id = None
    if not result.is_noop:
        compaction_id = _append_compaction(
            db,
            tenant_id=tenant_id,
            session_id=session_id,
            expected_last_seq=loaded.active.last_seq,
            result=result,
            requested_strategy="handoff",
            now=now,
        )
        record_compaction(
            strategy=result.strategy,
            requested_strategy="handoff",
            fell_back=result.fell_back,
            tokens_saved=result.tokens_before - result.tokens_after,
        )
    db.commit()  # no connection is held while the hook runs
    call = partial(
        hook_caller.call,
        str(hooks.session_end) if hooks.session_end else None,
        tenant_id=tenant_id,
        event="session_end",
        payload={
            "session_id": session_id,
            "compaction_id": compaction_id,
            "handoff": [e.item for e in result.history],
        },
        fail_closed=False,
    )
    hook = anyio.from_thread.run(call)
    record_hook(hook)
    conclusion_seq = None
    if body.conclusion is not None:
        _, conclusion_seq = conclude(
            db,
            tenant_id=tenant_id,
            child_id=session_id,
            conclusion=body.conclusion,
            fmt=body.format,
            via="end",
            now=now,
        )
        db.commit()
    return EndSessionResponse(
        compaction_id=compaction_id, hooks=[hook.as_dict()], conclusion_seq=conclusion_seq
    )


def _session_input(
    loaded: LoadedHistory, *, strategy: Strategy, params: CompactionParams
) -> CompactionInput:
    active = loaded.active
    return CompactionInput(
        history=active.entries(loaded.items),
        strategy=strategy,
        params=params,
        goal=active.goal.text if active.goal else None,
        invariants=invariant_items(active.goal, active.world_state),
    )


def _low_watermark_target(
    loaded: LoadedHistory, window: SessionWindow, *, groundings: Sequence[dict[str, Any]]
) -> int:
    """The default `target_tokens` of a session compaction, in the compaction's accounting (the
    history with its re-anchored invariants): what brings the assembled context down to the
    low watermark, or half the history when it is below that already. A session whose model
    kept needing what its contexts hid (`groundings`, its latest graded calls) compacts to
    halfway between the watermarks instead."""
    active = loaded.active
    count = token_counter(loaded.encoding)
    invariants = sum(
        item_tokens(item, count) for item in invariant_items(active.goal, active.world_state)
    )
    watermarks = window.watermarks
    if keeps_needing_what_was_hidden(groundings):
        watermarks = watermarks.relaxed()
    target = watermarks.target(window.tokens) - loaded.pinned_tokens(window) + invariants
    return max(1, min(target, loaded.tokens // 2))


def _params(spec: CompactParams) -> CompactionParams:
    return CompactionParams(
        keep_recent=spec.keep_recent,
        clear_at_least_tokens=spec.clear_at_least_tokens,
        exclude_tools=tuple(spec.exclude_tools),
        clear_tool_inputs=spec.clear_tool_inputs,
        target_tokens=spec.target_tokens,
        summarizer=spec.summarizer,
    )


def _client_summary(body: CompactRequest) -> tuple[str | None, dict[str, Any]]:
    """The narrative a `client` summarizer posted (None otherwise), and the summarizer report
    as it stands before any LLM is asked."""
    requested = body.params.summarizer
    if requested != "client":
        return None, {"requested": requested, "used": "builtin"}
    if body.summary is None and not body.dry_run:
        raise InvalidInput(
            "summarizer 'client' needs `summary.text` (a dry run returns the prompt to use)",
            details=[{"loc": ["body", "summary"], "msg": "required for summarizer client"}],
        )
    used = "client" if body.summary is not None else None
    return (body.summary.text if body.summary else None), {"requested": "client", "used": used}


def _stateless_input(
    body: CompactRequest, *, params: CompactionParams, count_tokens: CountTokens
) -> CompactionInput:
    items = to_responses(body.items or [], body.format).items
    normalized = normalize_history(items, count_tokens=count_tokens).items
    # Stateless: `seq` is the 1-based position in the normalized history.
    entries = tuple(HistoryEntry(seq=n, item=item) for n, item in enumerate(normalized, 1))
    return CompactionInput(history=entries, strategy=body.strategy, params=params, goal=body.goal)


def _with_llm_summary(
    inp: CompactionInput, *, settings: Settings
) -> tuple[CompactionInput, dict[str, Any]]:
    """`inp` with the narrative of the `llm` summarizer, or as it is (builtin) when the
    summarizer is unavailable; and the report of which one was used."""
    try:
        text = summarize_with_llm(render_summarization_prompt(inp), settings=settings)
    except SummarizerUnavailable as exc:
        return inp, {"requested": "llm", "used": "builtin", "error": str(exc)}
    return replace(inp, summary_text=text), {"requested": "llm", "used": "llm"}


def _pre_compact(
    hooks: SessionHooks,
    *,
    hook_caller: HookCaller,
    tenant_id: int,
    session_id: str,
    result: CompactionResult,
) -> HookResult:
    """The session's `pre_compact` hook on the plan; a veto (or a failure that fails closed)
    is a 409 and nothing is written."""
    if not hooks.pre_compact:
        # No hook to call: answered here, on whichever thread runs the compaction (an
        # evaluation's job has no event loop to hand a call to).
        unset = HookResult("pre_compact", "not_configured")
        record_hook(unset)
        return unset
    call = partial(
        hook_caller.call,
        str(hooks.pre_compact),
        tenant_id=tenant_id,
        event="pre_compact",
        payload={
            "session_id": session_id,
            "strategy": result.strategy,
            "covered": list(result.covered) if result.covered else None,
            "declares": result.declares,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
        },
        fail_closed=hooks.failure_policy == "fail_closed",
    )
    hook = anyio.from_thread.run(call)  # on the event loop, which bounds it by its deadline
    record_hook(hook)
    if hook.outcome in ("vetoed", "failed_closed"):
        raise Conflict(
            f"the pre_compact hook stopped the compaction ({hook.outcome}: {hook.detail})",
            details={"hooks": [hook.as_dict()]},
        )
    return hook


def _not_applied(
    body: CompactRequest, result: CompactionResult, *, stateless: bool, min_gain: float
) -> NotAppliedReason | None:
    """Why this compaction is answered without being written; None when it is written."""
    if body.dry_run:
        return "dry_run"
    if result.is_noop:
        return "noop"
    if stateless:
        return "stateless"
    if not result.frees_at_least(min_gain):
        return "too_little_gain"
    return None


MAX_LOST_LISTED = 50
"""A compaction answer lists at most this many lost identifiers (and counts them all)."""


def _respond(
    result: CompactionResult,
    *,
    body: CompactRequest,
    compaction_id: str | None = None,
    not_applied_because: NotAppliedReason | None = None,
    hooks: tuple[dict[str, Any], ...] = (),
    summarizer: dict[str, Any],
    prompt: str | None,
    goal: str | None,
    recommended: str | None = None,
) -> CompactResponse:
    output_format = body.output_format or body.format
    summary = result.summary.as_dict() if result.summary else None
    if summary is not None and summary["goal"] is None:
        summary["goal"] = goal  # the record names the goal it is pinned under; the answer states it
    rendered = from_responses([e.item for e in result.history], output_format)
    return CompactResponse(
        compaction_id=compaction_id,
        strategy=result.strategy,
        requested_strategy=body.strategy,
        declares=result.declares,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        summary=summary,
        notes=result.notes.as_dict() if result.notes else None,
        working_set=[{"seq": seq, "reason": reason} for seq, reason in result.working_set],
        history=rendered.items,
        system=rendered.system,
        conversion=rendered.report(),
        loss_check={"missing": list(result.loss_missing), "fell_back": result.fell_back},
        target_tokens=result.target_tokens,
        over_target_because=result.over_target,
        identifiers=None
        if result.is_noop
        else CompactedIdentifiers(
            found=result.identifiers_found,
            kept=result.identifiers_found - len(result.identifiers_lost),
            lost=[
                LostIdentifier(kind=lost.kind, text=lost.text, seqs=list(lost.seqs))
                for lost in result.identifiers_lost[:MAX_LOST_LISTED]
            ],
            lost_total=len(result.identifiers_lost),
        ),
        hooks=list(hooks),
        summarization_prompt=prompt,
        summarizer=summarizer,
        noop=result.is_noop,
        dry_run=body.dry_run,
        applied=compaction_id is not None,
        not_applied_because=not_applied_because,
        recommended_strategy=recommended,
    )
