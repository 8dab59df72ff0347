"""Assemble, replay and read back a plan: one context for one model call, its plan stored.

`assemble` is what `POST /assemble` does, callable without HTTP: it opens the plan's slot (the
lineage the prefix reuse is measured against), loads the session's history when the request
names one, builds the budget, asks the core for the plan, advises, renders the output format
and its cache breakpoints, and returns the answer with what is left to do after it (the cost
metrics, then on PostgreSQL the plan's write: `app.storage.plans` says when a plan is stored
and how a read still sees it at once). Invariants:

- The answer is a pure function of the request, the log up to `as_of_seq` and the previous plan
  of the same lineage: `plan_hash` pins the selection, replay re-runs it as of the same seq.
- The answer is JSON-ready data built once (`AssembleAnswer`, the fields of
  `AssembleResponse`), stored as is and sent as is: validating it as a model would cost more
  than the selection does (`docs/performance.md`, "Assembly over HTTP").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.contract.assembly import (
    AssembleAnswer,
    AssembleRequest,
    AssembleResponse,
    AssemblyDiffBody,
    CandidateSpec,
    MovedItem,
    ReplayRequest,
    ReplayResponse,
)
from app.domain.advice import Advice, budget_advice, with_history_cut
from app.domain.assemble import (
    HISTORY_SOURCE,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    Contribution,
    PrefixState,
    diff_selections,
)
from app.domain.assemble import assemble as assemble_plan
from app.domain.assemble.model import FINGERPRINT_CHARS
from app.domain.budget import effective_budget
from app.domain.elision import NOTICE_SOURCE, Elided
from app.domain.errors import InvalidInput
from app.domain.ids import derive_id
from app.domain.json_encoding import encode_json
from app.domain.manifest import manifest_contributions, manifest_from_document, view_for
from app.domain.prompt_cache import CacheStanding
from app.domain.recall import RECALL_TOOL_NAME, recall_tool
from app.domain.session_plan import plan_naming_what_it_leaves_out
from app.metrics import record_assembly, record_plan_store
from app.settings import Settings
from app.storage import cache_outcomes, manifest_rows, plans
from app.storage.session_rows import SessionSnapshot
from app.tokens import token_counter
from app.tracing import stage
from app.usecases.assembly_answer import (
    AssemblySetting,
    PrefixComparer,
    annotate_assembly,
    answer_of_plan,
    record_of,
    rendered,
)
from app.usecases.checkpointing import checkpoint_if_due
from app.usecases.loaded_history import cache_standing, load_history, session_window
from app.usecases.plan_record import (
    ReceivedRequest,
    answer_of_row,
    remember_shown_history,
    request_of,
)
from app.usecases.prefix import prefix_state

__all__ = ["Assembled", "StoredAnswer", "assemble", "replay", "stored_assembly"]


@dataclass(frozen=True)
class Assembled:
    """One assembly, not yet stored: the answer without its id, the plan, what to store and
    where (`slot`), and the encoding the plan was counted in."""

    answer: AssembleAnswer
    plan: AssemblyPlan
    record: Callable[[], plans.NewAssembly]
    """Builds what is stored: called once, after the answer where the write is deferred."""
    tenant_id: int
    slot: plans.AssemblySlot
    encoding: str
    compare: PrefixComparer
    """This assembly's reused prefix and break against another's fingerprints and state."""
    session: SessionSnapshot | None = None
    """The session whose history it shows (session mode)."""


@dataclass(frozen=True)
class StoredAnswer:
    """An assembly's answer, its id included, and the work left after it is sent: the cost
    metrics, then (PostgreSQL) the plan's write, both before the connection is reused."""

    answer: dict[str, Any]
    assembly_id: str
    after_answer: Callable[[], None]


def assemble(
    db: Session,
    *,
    tenant_id: int,
    request: AssembleRequest,
    received: ReceivedRequest,
    settings: Settings,
    now: datetime,
) -> StoredAnswer:
    """`POST /assemble`: one context made `now`, its plan stored (see the module docstring).
    `request` is `received`, checked."""
    with stage("assemble"):
        assembled = _run(
            db,
            tenant_id=tenant_id,
            request=request,
            received=received,
            settings=settings,
            now=now,
        )
        with stage("assemble.store"):
            assembly_id, store_later = plans.store_or_defer(
                db, assembled.record, tenant_id=tenant_id, slot=assembled.slot
            )
    return StoredAnswer(
        answer={"assembly_id": assembly_id, **assembled.answer},
        assembly_id=assembly_id,
        after_answer=functools.partial(
            _account_then_store,
            request,
            assembled,
            assembly_id=assembly_id,
            store_later=store_later,
            checkpoint=None
            if assembled.session is None
            else functools.partial(
                checkpoint_if_due,
                db,
                assembled.session,
                every=settings.checkpoint_every_facts,
                from_facts=settings.checkpoint_from_facts,
                now=now,
            ),
        ),
    )


def replay(
    db: Session,
    *,
    tenant_id: int,
    assembly_id: str,
    request: ReplayRequest,
    settings: Settings,
    now: datetime,
) -> ReplayResponse:
    """`POST /assemblies/{id}/replay`: the stored request with `request.overrides`, assembled
    again as of the same seq, stored as a new plan, and the difference."""
    row = plans.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
    received = request_of(db, row.request, tenant_id=tenant_id, session_key=row.session_key)
    original = AssembleRequest.model_validate_json(encode_json(received))
    overrides = request.overrides
    replaced = {source.source for source in overrides.replace_sources}
    dropped = set(overrides.drop_sources) | replaced
    changed = original.model_copy(
        update={
            "sources": [s for s in original.sources if s.source not in dropped]
            + list(overrides.replace_sources),
            **overrides.model_dump(
                include={"budget", "policy", "placement", "min_relevance"}, exclude_none=True
            ),
        }
    )
    if overrides.budget is not None:
        changed.budget = overrides.budget
    before = AssembleResponse.model_validate({"assembly_id": assembly_id, **answer_of_row(db, row)})
    assembled = _run(
        db,
        tenant_id=tenant_id,
        request=changed,
        received=ReceivedRequest.of(changed),
        settings=settings,
        now=now,
        as_of_seq=row.as_of_seq,
    )
    replay_id = plans.store_now(db, assembled.record(), slot=assembled.slot)
    db.commit()
    after = AssembleResponse.model_validate({"assembly_id": replay_id, **assembled.answer})
    diff = diff_selections(
        [(item.id, item.position) for item in before.items],
        [(item.id, item.position) for item in after.items],
        tokens_delta=after.total_tokens - before.total_tokens,
    )
    original_prefix = [(str(f)[:FINGERPRINT_CHARS], int(t)) for f, t in row.fingerprints]
    against_original = assembled.compare(original_prefix, PrefixState.read(row.prefix_state))
    return ReplayResponse(
        assembly=after,
        diff=AssemblyDiffBody(
            added=list(diff.added),
            removed=list(diff.removed),
            moved=[
                MovedItem(id=move.id, from_=move.from_position, to=move.to_position)
                for move in diff.moved
            ],
            tokens_delta=diff.tokens_delta,
            prefix_break=against_original.broke.as_dict() if against_original.broke else None,
        ),
    )


def stored_assembly(db: Session, *, tenant_id: int, assembly_id: str) -> dict[str, Any]:
    """`GET /assemblies/{id}`: the stored request and answer, as JSON-ready data."""
    row = plans.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
    request = request_of(db, row.request, tenant_id=tenant_id, session_key=row.session_key)
    return {
        "assembly_id": assembly_id,
        # The form every other timestamp of the API takes (pydantic's: UTC as `Z`).
        "created_at": row.created_at.isoformat().replace("+00:00", "Z"),
        "session_id": request.get("session_id"),
        "request": request,
        "response": {"assembly_id": assembly_id, **answer_of_row(db, row)},
        "grounding": row.grounding,
        "cache_outcome": cache_outcomes.outcome_of(db, row),
    }


def _candidate(spec: CandidateSpec, source: str) -> Candidate:
    fields: dict[str, Any] = {**spec, "source": source}
    fields.pop("form", None)  # only `raw` is accepted: the core picks cheaper forms itself
    # Cost is accounted per source unless the caller names a class.
    fields["source_class"] = spec.get("source_class") or source
    return Candidate(**fields)


def _manifest_sources(
    db: Session, *, tenant_id: int, request: AssembleRequest
) -> tuple[Contribution, ...]:
    if request.manifest is None:
        return ()
    if request.role is None:
        raise InvalidInput(
            "`manifest` needs a `role` to pick its view",
            details=[{"loc": ["body", "role"], "msg": "required with manifest"}],
        )
    stored = manifest_rows.get_manifest(db, tenant_id=tenant_id, name=request.manifest)
    manifest = manifest_from_document(stored.document)
    return manifest_contributions(view_for(manifest, request.role, environment=request.environment))


def _setting(
    db: Session,
    session: Any,
    *,
    request: AssembleRequest,
    settings: Settings,
    as_of_seq: int | None,
) -> AssemblySetting:
    loaded, window = None, None
    if session is not None:
        loaded = load_history(
            db,
            session,
            up_to_seq=as_of_seq,
            encoding=request.encoding,
            input_modalities=frozenset(request.input_modalities),
            recall_tool=request.recall_tool,
        )
        window = session_window(settings, session)
    encoding = loaded.encoding if loaded else request.encoding or settings.default_encoding
    tools = [recall_tool(request.output_format)] if loaded and loaded.recall_tool else []
    tools_tokens = sum(token_counter(encoding)(encode_json(tool).decode()) for tool in tools)
    # Usage reports count the definitions too: what the fitted overhead holds is not charged
    # again.
    charged_tools = window.tokenizer.beyond_overhead(tools_tokens) if window else tools_tokens
    explicit = request.budget.model_dump() if request.budget is not None else None
    budget = effective_budget(
        request.policy, session_window=window.tokens if window else None, explicit=explicit
    )
    # The tool definitions are sent with the context, in the same window.
    selection_budget = (
        replace(budget, max_tokens=max(0, budget.max_tokens - charged_tools))
        if charged_tools and budget.max_tokens is not None
        else budget
    )
    history = loaded.offered_history if loaded else ()
    return AssemblySetting(
        loaded, window, history, encoding, tools, tools_tokens, budget, selection_budget
    )


def _plan(
    setting: AssemblySetting,
    *,
    request: AssembleRequest,
    sources: tuple[Contribution, ...],
    settings: Settings,
) -> tuple[AssemblyPlan, tuple[Elided, ...]]:
    loaded, window = setting.loaded, setting.window
    requested = tuple(
        Contribution(s.source, tuple(_candidate(spec, s.source) for spec in s.items))
        for s in request.sources
    )
    assembly_input = AssemblyInput(
        contributions=sources + (loaded.state if loaded else ()) + requested,
        history=setting.history,
        history_tokens=loaded.offered_tokens if loaded else None,
        budget=setting.selection_budget,
        history_counts_toward_max_items=request.budget is not None or window is None,
        placement=request.placement,
        min_relevance=request.min_relevance,
        near_duplicate_threshold=settings.near_duplicate_threshold,
        recall_cap=settings.retrieval_recall_cap,
        history_cut_step=window.cut_step if window else None,
        keep_newest=loaded is not None,
        history_lead_source=NOTICE_SOURCE,
    )
    count = token_counter(setting.encoding)
    if loaded is None:
        return assemble_plan(assembly_input, count_tokens=count), ()
    tool = RECALL_TOOL_NAME if setting.tools else None
    return plan_naming_what_it_leaves_out(assembly_input, loaded, count=count, tool=tool)


def _prefix_state(
    request: AssembleRequest, setting: AssemblySetting, plan: AssemblyPlan
) -> PrefixState:
    return prefix_state(
        request, loaded=setting.loaded, tools=setting.tools, history=setting.history, plan=plan
    )


def _advice(setting: AssemblySetting, plan: AssemblyPlan, cache: CacheStanding | None) -> Advice:
    if setting.loaded is not None and setting.window is not None:
        cut = [e for e in plan.plan if e["source"] == HISTORY_SOURCE and e["decision"] == "dropped"]
        return with_history_cut(
            setting.loaded.advice(setting.window, cache),
            cut_items=len(cut),
            cut_tokens=sum(e["tokens"] for e in cut),
        )
    return budget_advice(total_tokens=plan.total_tokens, max_tokens=setting.budget.max_tokens)


def _run(
    db: Session,
    *,
    tenant_id: int,
    request: AssembleRequest,
    received: ReceivedRequest,
    settings: Settings,
    now: datetime,
    as_of_seq: int | None = None,
) -> Assembled:
    """Assemble one context, made `now`; the caller stores it. `as_of_seq` pins the session
    history (replay)."""
    with stage("assemble.load"):
        session, slot = plans.open_assembly(
            db, tenant_id=tenant_id, session_id=request.session_id, unit=request.unit
        )
        sources = _manifest_sources(db, tenant_id=tenant_id, request=request)
        setting = _setting(db, session, request=request, settings=settings, as_of_seq=as_of_seq)
    with stage("assemble.plan"):
        plan, elided = _plan(setting, request=request, sources=sources, settings=settings)
        cache = (
            cache_standing(session, setting.window, now=now, previous_call_at=slot.previous_at)
            if session is not None and setting.window is not None
            else None
        )
        advice = _advice(setting, plan, cache)
        compare = PrefixComparer(setting, plan, _prefix_state(request, setting, plan))
        comparison = compare(slot.previous_fingerprints, PrefixState.read(slot.previous_state))
    # A child session's tokens are accounted under its own unit unless the call names one.
    unit = request.unit or (setting.loaded.active.unit if setting.loaded else None)
    with stage("assemble.render"):
        rendering, breakpoints = rendered(plan, request.output_format, reused=comparison.reused)
    annotate_assembly(request, plan, unit=unit, reused=comparison.reused, advice=advice)
    answer = answer_of_plan(
        setting,
        plan,
        request=request,
        unit=unit,
        comparison=comparison,
        advice=advice,
        rendered=rendering,
        breakpoints=breakpoints,
        elided=elided,
        prompt_cache_key=(
            derive_id("pck", tenant_id, session.id, unit or "")
            if session is not None and request.output_format != "anthropic"
            else None
        ),
    )
    if setting.loaded is not None and session is not None:
        remember_shown_history(
            db,
            session,
            as_of_seq=setting.loaded.active.last_seq,
            encoding=setting.encoding,
            modalities=setting.loaded.input_modalities,
            history=setting.history,
        )
    return Assembled(
        answer=answer,
        plan=plan,
        record=functools.partial(
            record_of,
            tenant_id=tenant_id,
            session=session,
            setting=setting,
            request=request,
            received=received,
            answer=answer,
            compare=compare,
            now=now,
        ),
        tenant_id=tenant_id,
        slot=slot,
        encoding=setting.encoding,
        compare=compare,
        session=session if setting.loaded is not None else None,
    )


def _account_then_store(
    request: AssembleRequest,
    assembled: Assembled,
    *,
    assembly_id: str,
    store_later: Callable[[], float | None] | None,
    checkpoint: Callable[[], None] | None = None,
) -> None:
    """The work done after the caller has its answer: the cost metrics, then (PostgreSQL) the
    plan, whatever became of the metrics, and how its write went; then the session's
    checkpoint, when one is due (`app.usecases.checkpointing`)."""
    try:
        record_assembly(
            assembled.plan,
            assembly_id=assembly_id,
            reused_prefix_tokens=assembled.answer["cache"]["reused_prefix_tokens"],
            startup_tokens=assembled.answer["startup_tokens"],
            unit=assembled.answer["unit"],
            phase=request.phase,
            tenant=assembled.tenant_id,
            given_tokens={
                (s.source, c["id"]): tokens
                for s in request.sources
                for c in s.items
                if (tokens := c.get("tokens"))
            },
            count_tokens=token_counter(assembled.encoding),
        )
    finally:
        if store_later is not None:
            with stage("assemble.store"):
                record_plan_store(store_later())
        if checkpoint is not None:
            checkpoint()
