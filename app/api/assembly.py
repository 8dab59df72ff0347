"""`/assemble`, stored plans and replay: load, call the core, store, respond."""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response, status
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.api.compaction import session_advice
from app.api.deps import AppSettings, Db, RawBody, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.history import ActiveHistory, project_active_history
from app.api.isolation import manifest_from
from app.api.json_body import JsonRoute
from app.api.models import (
    AssembleRequest,
    AssembleResponse,
    AssemblyDiffBody,
    CandidateSpec,
    MovedItem,
    ReplayRequest,
    ReplayResponse,
    StoredAssemblyResponse,
    UsageRequest,
)
from app.api.responses import AnswerThenFinish, json_response
from app.domain.assemble import (
    POLICIES,
    AssemblyInput,
    AssemblyPlan,
    Budget,
    Candidate,
    Contribution,
    diff_selections,
    shared_prefix_tokens,
)
from app.domain.assemble import assemble as assemble_plan
from app.domain.errors import InvalidInput
from app.domain.formats import from_responses
from app.domain.history import HistoryEntry
from app.domain.ids import derive_id
from app.domain.items import Item, developer_message, visible_text
from app.domain.json_encoding import encode_json
from app.domain.manifest import manifest_contributions, view_for
from app.domain.normalize import normalize_history
from app.domain.world_state import (
    is_state_fragment,
    render_goal,
    render_section,
    section_layer,
)
from app.metrics import (
    ASSEMBLY_DECISIONS,
    ASSEMBLY_FLAGS,
    ASSEMBLY_LATENCY,
    ASSEMBLY_PREFIX_TOKENS,
    ASSEMBLY_SIZE,
    CONTEXT_TOKENS,
    PHASE_LABEL,
    PLAN_STORE_FAILURES,
    PLAN_STORE_LATENCY,
    PROVIDER_TOKENS,
    TOKEN_ESTIMATE_ERROR,
    UNIT_LABEL,
)
from app.settings import Settings
from app.storage import repository
from app.tokens import token_counter

log = logging.getLogger("contextd")

router = APIRouter(route_class=JsonRoute, tags=["assembly"], responses=ERROR_RESPONSES)


def _effective_budget(request: AssembleRequest, *, session_window: int | None) -> Budget:
    """Preset, then session defaults, then the explicit budget field by field."""
    budget = POLICIES[request.policy]
    if session_window is not None and request.budget is None:
        budget = replace(budget, max_tokens=session_window)
    if request.budget is not None:
        given = request.budget.model_dump(exclude_none=True)
        budget = replace(budget, **given)
    return budget


def _candidates(request: AssembleRequest) -> tuple[Contribution, ...]:
    return tuple(
        Contribution(
            source=source.source,
            candidates=tuple(_candidate(spec, source.source) for spec in source.items),
        )
        for source in request.sources
    )


def _candidate(spec: CandidateSpec, source: str) -> Candidate:
    fields: dict[str, Any] = {**spec, "source": source}
    fields.pop("form", None)  # only `raw` is accepted: the core picks cheaper forms itself
    # Cost is accounted per source unless the caller names a class.
    fields["source_class"] = spec.get("source_class") or source
    return Candidate(**fields)


def _session_state_sources(history: ActiveHistory) -> tuple[Contribution, ...]:
    """The current goal and world state as required candidates.

    The goal and the governing sections sit in the stable prefix, verbatim; the goal is also
    restated at the end under `edges` placement (the two high-attention positions). The
    environment and caller-named sections go with the task.
    """
    state = history.world_state
    sections = tuple(
        Candidate(
            id=f"world_state:{section}",
            source="world_state",
            layer=section_layer(section),
            source_class="world_state",
            content=visible_text(render_section(section, value, version=state.version)),
            required=True,
        )
        for section, value in sorted(state.sections.items())
    )
    goal = history.goal
    goals = (
        ()
        if goal is None
        else (
            Candidate(
                id="goal",
                source="goal",
                layer="prefix",
                source_class="goal",
                content=visible_text(render_goal(goal.text, version=goal.version)),
                required=True,
                restate_at_end=True,
            ),
        )
    )
    return tuple(
        Contribution(source=name, candidates=candidates)
        for name, candidates in (("goal", goals), ("world_state", sections))
        if candidates
    )


def _read_without_transaction(db: Session) -> None:
    """On PostgreSQL, makes `db`'s reads autocommit: no BEGIN and COMMIT round trips.

    An assembly's reads need no common snapshot: facts are append-only and read up to the
    session row's last_seq, so the row and the facts agree whatever commits in between; the
    lineage lookup draws a sequence value, which no rollback would return anyway. A session
    that already began (a replay has read its stored assembly) is left as it is.
    """
    if not db.in_transaction() and repository.ids_reserved_up_front(db):
        db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


def run_assembly(
    db: Session,
    *,
    tenant_id: int,
    request: AssembleRequest,
    request_text: str,
    settings: Settings,
    as_of_seq: int | None = None,
) -> Assembled:
    """Assemble one context; the caller stores it. `as_of_seq` pins the session history (replay).

    The response is plain JSON-ready data: it is built once from the plan, stored, and sent as
    is (validating it again would cost more than the selection itself).
    """
    _read_without_transaction(db)
    history: tuple[HistoryEntry, ...] = ()
    loaded_history: ActiveHistory | None = None
    normalized_history: Sequence[Item] = ()
    history_sizes: list[int] = []
    session_sources: tuple[Contribution, ...] = ()
    session_pk: int | None = None
    window: int | None = None
    encoding = request.encoding or settings.default_encoding
    slot: repository.AssemblySlot | None = None
    if request.session_id is not None:
        row, slot = repository.session_and_slot(
            db, tenant_id=tenant_id, external_id=request.session_id, unit=request.unit
        )
        loaded = project_active_history(db, row, up_to_seq=as_of_seq)
        session_pk, as_of_seq = loaded.session_pk, loaded.last_seq
        loaded_history = loaded
        encoding = request.encoding or loaded.encoding
        window = max(1, loaded.context_window - settings.output_reserve_tokens)
        normalized = normalize_history(
            loaded.items,
            count_tokens=token_counter(encoding),
            input_modalities=frozenset(request.input_modalities),
            item_metadata=loaded.metadata,
        )
        normalized_history = normalized.items
        # Counted once here for both the selection and the advice.
        history_sizes = loaded.token_counts(normalized_history, encoding)
        # World-state and goal fragments are re-rendered fresh below, never shown twice.
        kept = [
            (item, size)
            for item, size in zip(normalized_history, history_sizes, strict=True)
            if not is_state_fragment(item)
        ]
        history = tuple(
            [
                HistoryEntry(None, item, tokens=size, id=f"history:{ordinal}")
                for ordinal, (item, size) in enumerate(kept)
            ]
        )
        session_sources = _session_state_sources(loaded)
    if request.manifest is not None:
        if request.role is None:
            raise InvalidInput(
                "`manifest` needs a `role` to pick its view",
                details=[{"loc": ["body", "role"], "msg": "required with manifest"}],
            )
        stored = repository.get_manifest(db, tenant_id=tenant_id, name=request.manifest)
        view = view_for(
            manifest_from(stored.document), request.role, environment=request.environment
        )
        session_sources = manifest_contributions(view) + session_sources
    # A child session's tokens are accounted under its own unit unless the call names one.
    unit = request.unit or (loaded_history.unit if loaded_history else None)
    count_tokens = token_counter(encoding)
    budget = _effective_budget(request, session_window=window)
    plan = assemble_plan(
        AssemblyInput(
            contributions=session_sources + _candidates(request),
            history=history,
            budget=budget,
            history_counts_toward_max_items=request.budget is not None or window is None,
            placement=request.placement,
            min_relevance=request.min_relevance,
            near_duplicate_threshold=settings.near_duplicate_threshold,
            recall_cap=settings.retrieval_recall_cap,
        ),
        count_tokens=count_tokens,
    )
    fingerprints: list[tuple[str, int]] = [(item.fingerprint, item.tokens) for item in plan.items]
    if slot is None:
        slot = repository.reserve_assembly(
            db, tenant_id=tenant_id, session_pk=session_pk, unit=unit
        )
    previous = [(str(f), int(t)) for f, t in slot.previous_fingerprints]
    reused = shared_prefix_tokens(previous, fingerprints)
    if loaded_history is not None:
        # Advice counts in the session's encoding; the sizes above are in the request's.
        same_encoding = encoding == loaded_history.encoding
        advice = session_advice(
            loaded_history,
            normalized_history,
            settings=settings,
            sizes=history_sizes if same_encoding else None,
        )
    else:
        pressure = plan.total_tokens / (budget.max_tokens or max(plan.total_tokens, 1))
        advice = {
            "should_compact": False,
            "pressure": round(pressure, 4),
            "reasons": [],
            "turns_until_full": None,
            "recommended_strategy": None,
        }
    # Everything selected, in position order, as one provider-ready list: text candidates
    # become developer messages, items stay as they are.
    context = [
        item.item if item.item is not None else developer_message(item.content or "")
        for item in plan.items
    ]
    startup_tokens = sum(i.tokens for i in plan.items if i.layer == "prefix")

    response: dict[str, Any] = {
        "plan_hash": plan.plan_hash,
        "total_tokens": plan.total_tokens,
        "truncated": plan.truncated,
        "over_budget": plan.over_budget,
        "items": [
            {
                "id": item.id,
                "source": item.source,
                "layer": item.layer,
                "source_class": item.source_class,
                "form": item.form,
                "position": item.position,
                "tokens": item.tokens,
                "content": item.content,
                "item": item.item,
            }
            for item in plan.items
        ],
        "plan": plan.plan,
        "by_source_class": plan.by_source_class,
        "cache": {
            "reused_prefix_tokens": reused,
            "new_tokens": plan.total_tokens - reused,
        },
        "advice": advice,
        "budget": asdict(budget),
        "startup_tokens": startup_tokens,
        "unit": unit,
        "messages": from_responses(context, request.output_format).items,
    }

    record = repository.NewAssembly(
        tenant_id=tenant_id,
        session_pk=session_pk,
        as_of_seq=as_of_seq,
        unit=unit,
        phase=request.phase,
        plan_hash=plan.plan_hash,
        request=request_text,
        response=response,
        fingerprints=[list(pair) for pair in fingerprints],
    )
    return Assembled(response=response, plan=plan, record=record, slot=slot, encoding=encoding)


@dataclass(frozen=True)
class Assembled:
    """One assembly, not yet stored: the response without its id, the plan, what to store and
    where (`slot`)."""

    response: dict[str, Any]
    plan: AssemblyPlan
    record: repository.NewAssembly
    slot: repository.AssemblySlot
    encoding: str
    """The encoding the plan was counted in: the call's, else the session's, else the default."""


def _assembly_id_deriver(tenant_id: int) -> Callable[[int], str]:
    return functools.partial(derive_id, "asm", tenant_id)


def _store_now(db: Session, assembled: Assembled, *, tenant_id: int) -> dict[str, Any]:
    """Store the assembly in the caller's transaction; returns the response with its id."""
    assembly_id = repository.store_assembly(
        db,
        assembled.record,
        row_id=assembled.slot.row_id,
        derive_id=_assembly_id_deriver(tenant_id),
    )
    return {"assembly_id": assembly_id, **assembled.response}


def _store_after_answer(
    session_factory: sessionmaker[Session],
    record: repository.NewAssembly,
    *,
    row_id: int,
    derive: Callable[[int], str],
) -> None:
    """Write a plan whose id was already handed out (see `AnswerThenFinish`). A failure is
    logged and counted, never retried: the caller has its answer."""
    started = time.perf_counter()
    try:
        with session_factory() as db:
            repository.store_assembly(db, record, row_id=row_id, derive_id=derive)
            db.commit()
    except SQLAlchemyError:
        PLAN_STORE_FAILURES.inc()
        log.exception("assembly %s was answered but could not be stored", derive(row_id))
        return
    PLAN_STORE_LATENCY.observe(time.perf_counter() - started)


def _record_metrics(
    response: dict[str, Any], plan: AssemblyPlan, *, unit: str | None, phase: str | None
) -> None:
    unit_label, phase_label = UNIT_LABEL(unit), PHASE_LABEL(phase)
    exemplar = {"assembly_id": response["assembly_id"]}
    reused_left: int = response["cache"]["reused_prefix_tokens"]
    # Summed per label set first: a label lookup costs more than the addition.
    handed_out: Counter[tuple[str, str]] = Counter()
    for item in plan.items:
        # Items of the reused prefix come first: attribute their tokens to the cache axis.
        reused_part = min(reused_left, item.tokens)
        reused_left -= reused_part
        handed_out[item.source_class, "reused_prefix"] += reused_part
        handed_out[item.source_class, "new"] += item.tokens - reused_part
    for (source_class, cache), tokens in sorted(handed_out.items()):
        if tokens:
            CONTEXT_TOKENS.labels(source_class, cache, unit_label, phase_label).inc(tokens)
    decisions = Counter((entry["decision"], entry["reason"] or "none") for entry in plan.plan)
    for (decision, reason), count in sorted(decisions.items()):
        ASSEMBLY_DECISIONS.labels(decision, reason).inc(count)
    for flag, raised in (("truncated", plan.truncated), ("over_budget", plan.over_budget)):
        if raised:
            ASSEMBLY_FLAGS.labels(flag).inc()
    ASSEMBLY_SIZE.observe(plan.total_tokens, exemplar=exemplar)
    ASSEMBLY_PREFIX_TOKENS.labels(unit_label).inc(response["startup_tokens"])


@router.post("/assemble", status_code=status.HTTP_201_CREATED, response_model=AssembleResponse)
def assemble(
    body: AssembleRequest,
    raw: RawBody,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
    http_request: Request,
) -> Response:
    """Selects, places and accounts one context, and stores its plan under `assembly_id`.

    On PostgreSQL the plan is written just after the response is sent and before the
    connection takes its next request: a later request on the same connection always finds
    it; one on another connection may not, for the few milliseconds the write takes. On SQLite
    it is stored before the response is sent. The cost metrics are recorded after the response
    is sent too, likewise before the connection's next request.
    """
    started = time.perf_counter()
    try:
        # Stored as received: re-serialising a half-megabyte request costs milliseconds.
        request_text = raw.decode()
    except UnicodeDecodeError:  # JSON may arrive as UTF-16 or UTF-32
        request_text = body.model_dump_json(exclude_defaults=True)
    assembled = run_assembly(
        db, tenant_id=tenant_id, request=body, request_text=request_text, settings=settings
    )
    row_id = assembled.slot.row_id
    if row_id is None:
        response = _store_now(db, assembled, tenant_id=tenant_id)
        db.commit()
        store_later = None
    else:
        # Writing a half-megabyte request is most of a call's work; the caller need not wait.
        db.commit()
        derive = _assembly_id_deriver(tenant_id)
        response = {"assembly_id": derive(row_id), **assembled.response}
        store_later = functools.partial(
            _store_after_answer,
            http_request.app.state.session_factory,
            assembled.record,
            row_id=row_id,
            derive=derive,
        )
    ASSEMBLY_LATENCY.observe(
        time.perf_counter() - started, exemplar={"assembly_id": response["assembly_id"]}
    )
    return AnswerThenFinish(
        encode_json(response),
        finish=functools.partial(
            _account_then_store, body, assembled, response, store_later=store_later
        ),
        status_code=status.HTTP_201_CREATED,
    )


def _account_then_store(
    body: AssembleRequest,
    assembled: Assembled,
    response: dict[str, Any],
    *,
    store_later: Callable[[], None] | None,
) -> None:
    """The work done after the caller has its answer: the cost metrics, then (PostgreSQL) the
    plan. Both are done before the connection takes its next request."""
    plan = assembled.plan
    _record_metrics(response, plan, unit=response["unit"], phase=body.phase)
    _record_estimate_error(body, plan, encoding=assembled.encoding)
    if store_later is not None:
        store_later()


def _record_estimate_error(body: AssembleRequest, plan: AssemblyPlan, *, encoding: str) -> None:
    """Compare caller-given counts with exact ones, for the selected raw items only (cheap)."""
    given = {
        (s.source, c["id"]): c.get("tokens")
        for s in body.sources
        for c in s.items
        if c.get("tokens")
    }
    count_tokens = token_counter(encoding)
    for item in plan.items:
        estimate = given.get((item.source, item.id))
        if estimate is not None and item.form == "raw" and item.content is not None:
            exact = count_tokens(item.content)
            if exact:
                TOKEN_ESTIMATE_ERROR.observe(abs(estimate - exact) / exact)


@router.get("/assemblies/{assembly_id}", response_model=StoredAssemblyResponse)
def get_assembly(assembly_id: str, tenant_id: TenantId, db: Db) -> Response:
    row = repository.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
    request = orjson.loads(row.request)
    return json_response(
        {
            "assembly_id": assembly_id,
            "created_at": row.created_at.isoformat(),
            "session_id": request.get("session_id"),
            "request": request,
            "response": {"assembly_id": assembly_id, **row.response},
        }
    )


@router.post(
    "/assemblies/{assembly_id}/replay",
    status_code=status.HTTP_201_CREATED,
    response_model=ReplayResponse,
)
def replay_assembly(
    assembly_id: str, body: ReplayRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> ReplayResponse:
    row = repository.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
    original = AssembleRequest.model_validate_json(row.request)
    overrides = body.overrides
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
    before = AssembleResponse.model_validate({"assembly_id": assembly_id, **row.response})
    assembled = run_assembly(
        db,
        tenant_id=tenant_id,
        request=changed,
        request_text=changed.model_dump_json(exclude_defaults=True),
        settings=settings,
        as_of_seq=row.as_of_seq,
    )
    after_data = _store_now(db, assembled, tenant_id=tenant_id)
    db.commit()
    after = AssembleResponse.model_validate(after_data)
    diff = diff_selections(
        [(item.id, item.position) for item in before.items],
        [(item.id, item.position) for item in after.items],
        tokens_delta=after.total_tokens - before.total_tokens,
    )
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
        ),
    )


@router.post(
    "/sessions/{session_id}/usage",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
)
def report_usage(session_id: str, body: UsageRequest, tenant_id: TenantId, db: Db) -> Response:
    """Provider-reported usage, folded into the cache-status axis of the cost metrics."""
    repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    unit, phase = UNIT_LABEL(body.unit), PHASE_LABEL(body.phase)
    PROVIDER_TOKENS.labels("cached", unit, phase).inc(body.cached_tokens)
    PROVIDER_TOKENS.labels("uncached", unit, phase).inc(
        max(0, body.input_tokens - body.cached_tokens)
    )
    PROVIDER_TOKENS.labels("output", unit, phase).inc(body.output_tokens)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
