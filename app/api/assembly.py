"""`/assemble`, stored plans and replay: load, call the core, store, respond.

The response is plain JSON-ready data: it is built once from the plan, stored, and sent as is
(validating it again would cost more than the selection itself). Where and when the plan is
written is `app.storage.plans`' business.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from fastapi import APIRouter, Response, status
from sqlalchemy.orm import Session

from app.api.deps import AppSettings, Db, RawBody, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.api.responses import AnswerThenFinish, json_response
from app.contract.assembly import (
    AssembleRequest,
    AssembleResponse,
    AssemblyDiffBody,
    CandidateSpec,
    MovedItem,
    ReplayRequest,
    ReplayResponse,
    StoredAssemblyResponse,
)
from app.domain.advice import budget_advice, with_history_cut
from app.domain.assemble import (
    HISTORY_SOURCE,
    TRUNCATED_FORM,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    Contribution,
    Layer,
    PlanEntry,
    diff_selections,
    reused_prefix,
)
from app.domain.assemble import assemble as assemble_plan
from app.domain.budget import effective_budget
from app.domain.compaction.product import is_compaction_product
from app.domain.elision import (
    NOTICE_ID,
    NOTICE_SOURCE,
    Elided,
    Shown,
    elisions,
    named_seqs,
    notice_text,
    unnamed,
)
from app.domain.errors import InvalidInput
from app.domain.formats import (
    Rendering,
    from_responses,
    place_cache_breakpoint,
    trim_cache_breakpoints,
)
from app.domain.ids import derive_id
from app.domain.items import CountTokens, developer_message, visible_text
from app.domain.json_encoding import decode_json, encode_json
from app.domain.manifest import manifest_contributions, manifest_from_document, view_for
from app.domain.recall import RECALL_TOOL_NAME, recall_tool
from app.domain.world_state import history_without_fragments, is_state_fragment
from app.metrics import ASSEMBLY_LATENCY, record_assembly
from app.settings import Settings
from app.storage import plans, repository
from app.storage.history import LoadedHistory, load_history
from app.tokens import token_counter

router = APIRouter(route_class=JsonRoute, tags=["assembly"], responses=ERROR_RESPONSES)


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
    stored = repository.get_manifest(db, tenant_id=tenant_id, name=request.manifest)
    manifest = manifest_from_document(stored.document)
    return manifest_contributions(view_for(manifest, request.role, environment=request.environment))


@dataclass(frozen=True)
class Assembled:
    """One assembly, not yet stored: the response without its id, the plan, what to store and
    where (`slot`), and the encoding the plan was counted in."""

    response: dict[str, Any]
    plan: AssemblyPlan
    record: plans.NewAssembly
    slot: plans.AssemblySlot
    encoding: str


def _run(
    db: Session,
    *,
    tenant_id: int,
    request: AssembleRequest,
    request_text: str,
    settings: Settings,
    as_of_seq: int | None = None,
) -> Assembled:
    """Assemble one context; the caller stores it. `as_of_seq` pins the session history (replay)."""
    session, slot = plans.open_assembly(
        db, tenant_id=tenant_id, session_id=request.session_id, unit=request.unit
    )
    sources = _manifest_sources(db, tenant_id=tenant_id, request=request)
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
        sources += loaded.state
        window = settings.session_window(session)
    requested = tuple(
        Contribution(s.source, tuple(_candidate(spec, s.source) for spec in s.items))
        for s in request.sources
    )
    explicit = request.budget.model_dump() if request.budget is not None else None
    encoding = loaded.encoding if loaded else request.encoding or settings.default_encoding
    tools = [recall_tool(request.output_format)] if loaded and loaded.recall_tool else []
    tools_tokens = sum(token_counter(encoding)(encode_json(tool).decode()) for tool in tools)
    # Usage reports count the definitions too: what the fitted overhead holds is not charged
    # again.
    charged_tools = window.tokenizer.beyond_overhead(tools_tokens) if window else tools_tokens
    budget = effective_budget(
        request.policy, session_window=window.tokens if window else None, explicit=explicit
    )
    # The tool definitions are sent with the context, in the same window.
    selection_budget = (
        replace(budget, max_tokens=max(0, budget.max_tokens - charged_tools))
        if charged_tools and budget.max_tokens is not None
        else budget
    )
    assembly_input = AssemblyInput(
        contributions=sources + requested,
        history=history_without_fragments(loaded.items, loaded.sizes, seqs=loaded.seqs)
        if loaded
        else (),
        budget=selection_budget,
        history_counts_toward_max_items=request.budget is not None or window is None,
        placement=request.placement,
        min_relevance=request.min_relevance,
        near_duplicate_threshold=settings.near_duplicate_threshold,
        recall_cap=settings.retrieval_recall_cap,
        history_cut_step=window.cut_step if window else None,
        keep_newest=loaded is not None,
        history_lead_source=NOTICE_SOURCE,
    )
    count = token_counter(encoding)
    elided: tuple[Elided, ...] = ()
    if loaded is None:
        plan = assemble_plan(assembly_input, count_tokens=count)
    else:
        plan, elided = _plan_naming_what_it_leaves_out(
            assembly_input, loaded, count=count, tool=RECALL_TOOL_NAME if tools else None
        )
    fingerprints = [(item.fingerprint, item.tokens) for item in plan.items]
    reused = reused_prefix(slot.previous_fingerprints, fingerprints)
    if loaded is not None and window is not None:
        cut = [e for e in plan.plan if e["source"] == HISTORY_SOURCE and e["decision"] == "dropped"]
        advice = with_history_cut(
            loaded.advice(window),
            cut_items=len(cut),
            cut_tokens=sum(e["tokens"] for e in cut),
        )
    else:
        advice = budget_advice(total_tokens=plan.total_tokens, max_tokens=budget.max_tokens)
    # A child session's tokens are accounted under its own unit unless the call names one.
    unit = request.unit or (loaded.active.unit if loaded else None)
    # Everything selected, in position order, as one provider-ready list: text candidates
    # become developer messages, items stay as they are.
    context = [
        item.item if item.item is not None else developer_message(item.content or "")
        for item in plan.items
    ]
    rendered = from_responses(context, request.output_format)
    breakpoints = (
        _cache_breakpoints(rendered, plan, reused_items=reused.items)
        if request.output_format == "anthropic"
        else []
    )
    response: dict[str, Any] = {
        "plan_hash": plan.plan_hash,
        "total_tokens": plan.total_tokens,
        "provider_tokens_estimate": (
            window.tokenizer.provider_tokens(plan.total_tokens) if window else None
        ),
        "encoding": encoding,
        "tokenizer": window.tokenizer.as_dict() if window else None,
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
            "reused_prefix_tokens": reused.tokens,
            "new_tokens": plan.total_tokens - reused.tokens,
            "reused_prefix_items": reused.items,
            "last_reused_item_id": plan.items[reused.items - 1].id if reused.items else None,
        },
        "advice": advice.as_dict(),
        "budget": asdict(budget),
        "startup_tokens": sum(i.tokens for i in plan.items if i.layer == "prefix"),
        "unit": unit,
        "messages": rendered.items,
        "system": rendered.system,
        "cache_breakpoints": breakpoints,
        "prompt_cache_key": (
            derive_id("pck", tenant_id, session.id, unit or "")
            if session is not None and request.output_format != "anthropic"
            else None
        ),
        "conversion": rendered.report(),
        "tools": tools,
        "tools_tokens": tools_tokens,
        "elided": [asdict(entry) for entry in elided],
    }
    record = plans.NewAssembly(
        tenant_id=tenant_id,
        session_pk=session.id if session else None,
        as_of_seq=loaded.active.last_seq if loaded else None,
        unit=unit,
        phase=request.phase,
        plan_hash=plan.plan_hash,
        request=request_text,
        response=response,
        fingerprints=[list(pair) for pair in fingerprints],
    )
    return Assembled(response=response, plan=plan, record=record, slot=slot, encoding=encoding)


_NOTICE_PASSES = 3
"""Assemblies tried to settle the notice: adding it leaves the history less room, which can
leave out more (one more pass), and what that leaves out extends a range the notice already
names (so a third pass is rarely needed, and none after it)."""


def _plan_naming_what_it_leaves_out(
    assembly_input: AssemblyInput, loaded: LoadedHistory, *, count: CountTokens, tool: str | None
) -> tuple[AssemblyPlan, tuple[Elided, ...]]:
    """A session-mode plan, what it leaves out of the session's history, and the notices naming
    whatever of that its visible text does not already name: what lies before the first fact
    the history shows in the stable prefix, before the history (it changes only where the
    history's start does); what lies within it, such as a system message normalization left
    out mid-session, after the history (a new one then rewrites only what follows the history,
    never the history itself)."""
    notice: Contribution | None = None
    for _ in range(_NOTICE_PASSES):
        contributions = assembly_input.contributions + ((notice,) if notice else ())
        plan = assemble_plan(
            replace(assembly_input, contributions=contributions), count_tokens=count
        )
        elided = _elided(loaded, plan)
        named = named_seqs(
            item.content or "" if item.item is None else visible_text(item.item)
            for item in plan.items
            if item.source != NOTICE_SOURCE
        )
        start = _first_shown_seq(loaded, plan)
        missing = unnamed(elided, named)
        before = [entry for entry in missing if start is None or entry.last_seq < start]
        within = [entry for entry in missing if entry not in before]
        placements: tuple[tuple[str, Layer, list[Elided]], ...] = (
            (NOTICE_ID, "prefix", before),
            (f"{NOTICE_ID}#within", "task", within),
        )
        candidates = tuple(
            Candidate(
                id=item_id,
                source=NOTICE_SOURCE,
                layer=layer,
                source_class=NOTICE_SOURCE,
                content=text,
                required=True,
            )
            for item_id, layer, entries in placements
            if (text := notice_text(entries, tool=tool)) is not None
        )
        wanted = Contribution(NOTICE_SOURCE, candidates) if candidates else None
        if wanted == notice:
            break
        notice = wanted
    return plan, elided


def _history_decisions(loaded: LoadedHistory, plan: AssemblyPlan) -> list[tuple[int, PlanEntry]]:
    """(index in the normalized history, plan entry) of each history item the plan decided
    on: every item but the state fragments, which the world state shows."""
    offered = [j for j, item in enumerate(loaded.items) if not is_state_fragment(item)]
    decisions = [entry for entry in plan.plan if entry["source"] == HISTORY_SOURCE]
    return list(zip(offered, decisions, strict=True))


def _first_shown_seq(loaded: LoadedHistory, plan: AssemblyPlan) -> int | None:
    """The fact seq of the first history item `plan` shows (records a compaction wrote have
    none); None when it shows no logged fact."""
    return min(
        (
            seq
            for j, entry in _history_decisions(loaded, plan)
            if entry["decision"] == "selected" and (seq := loaded.seqs[j]) is not None
        ),
        default=None,
    )


_WINDOW_DROPS = {"max_tokens": "window", "history_cut": "window"}
"""Both are the window's doing, seen from the model: one reason keeps the notice the same
while a calibration or a cheaper call moves where one ends and the other starts."""


def _elided(loaded: LoadedHistory, plan: AssemblyPlan) -> tuple[Elided, ...]:
    """What `plan` leaves out of the session's history (see `app.domain.elision`)."""
    active = loaded.active
    history = [
        (seq, entry[1], entry[4] or 0)
        for seq, entry in active.logged.items()
        # A fact without model-visible text (an unknown type, say) has nothing to read back.
        if entry[4]
        and seq > active.reset_at
        and seq not in active.retracted
        and not is_state_fragment(entry[1])
    ]
    shown = {
        j: Shown(
            tokens=entry["tokens"] if entry["decision"] == "selected" else 0,
            dropped=None
            if entry["decision"] == "selected"
            else _WINDOW_DROPS.get(entry["reason"] or "", entry["reason"]),
            cut=entry["form"] == TRUNCATED_FORM,
        )
        for j, entry in _history_decisions(loaded, plan)
    }
    return elisions(
        history=history,
        active_items=active.items,
        active_seqs=active.seqs,
        normalized=loaded.items,
        shown=shown,
        excluded={entry.index: entry.reason for entry in loaded.normalized.report.excluded},
        compacted_by=active.compacted_by,
        compaction_id=active.compaction_id,
        record_tokens=sum(
            item.tokens
            for item in plan.items
            if item.item is not None and is_compaction_product(item.item)
        ),
    )


def _cache_breakpoints(
    rendered: Rendering, plan: AssemblyPlan, *, reused_items: int
) -> list[dict[str, Any]]:
    """Marks Anthropic prompt-cache breakpoints on `rendered` and says where they are.

    Three places, in request order: the end of the stable prefix (system content that changes
    only with rules, tools or the goal), the last block the previous call of this lineage shares
    (read from the cache), and the end of the history (written for the next call, whose history
    extends this one). Breakpoints a client sent stay while the request has room for them.
    """
    items = plan.items
    leading_prefix = next((i for i, it in enumerate(items) if it.layer != "prefix"), len(items))
    history = [i for i, it in enumerate(items) if it.source == HISTORY_SOURCE]
    targets = [
        ("stable_prefix", leading_prefix - 1),
        ("previous_call", reused_items - 1),
        ("history_end", history[-1] if history else -1),
    ]
    placed: list[dict[str, Any]] = []
    marked: set[tuple[int | None, int | None]] = set()
    for reason, position in sorted(targets, key=lambda target: target[1]):
        if position < 0:
            continue
        block = place_cache_breakpoint(rendered, position)
        if block is None or (block.message, block.block) in marked:
            continue
        marked.add((block.message, block.block))
        placed.append(
            {
                "reason": reason,
                "position": position,
                "item_id": items[position].id,
                "message": block.message,
                "block": block.block,
            }
        )
    trim_cache_breakpoints(rendered, keep=marked)
    return placed


@router.post(
    "/assemble",
    status_code=status.HTTP_201_CREATED,
    response_model=AssembleResponse,
    responses=rule_responses("duplicate_candidate_ids", "unstorable_value"),
)
def assemble(
    body: AssembleRequest,
    raw: RawBody,
    tenant_id: TenantId,
    db: Db,
    settings: AppSettings,
) -> Response:
    """Selects, places and accounts one context, and stores its plan under `assembly_id`
    (see `app.storage.plans` for when the plan is written). The cost metrics are recorded just
    after the response is sent, before the connection takes its next request. A `role` the
    stored `manifest` has no view for is a 409 `role_not_in_manifest`."""
    started = time.perf_counter()
    try:
        # Stored as received: re-serialising a half-megabyte request costs milliseconds.
        request_text = raw.decode()
    except UnicodeDecodeError:  # JSON may arrive as UTF-16 or UTF-32
        request_text = body.model_dump_json(exclude_defaults=True)
    assembled = _run(
        db, tenant_id=tenant_id, request=body, request_text=request_text, settings=settings
    )
    assembly_id, store_later = plans.store_or_defer(db, assembled.record, slot=assembled.slot)
    response = {"assembly_id": assembly_id, **assembled.response}
    ASSEMBLY_LATENCY.observe(time.perf_counter() - started, exemplar={"assembly_id": assembly_id})
    return AnswerThenFinish(
        encode_json(response),
        finish=functools.partial(
            _account_then_store, body, assembled, assembly_id=assembly_id, store_later=store_later
        ),
        status_code=status.HTTP_201_CREATED,
    )


def _account_then_store(
    body: AssembleRequest,
    assembled: Assembled,
    *,
    assembly_id: str,
    store_later: Callable[[], None] | None,
) -> None:
    """The work done after the caller has its answer: the cost metrics, then (PostgreSQL) the
    plan, whatever became of the metrics. Both are done before the connection takes its next
    request."""
    try:
        record_assembly(
            assembled.plan,
            assembly_id=assembly_id,
            reused_prefix_tokens=assembled.response["cache"]["reused_prefix_tokens"],
            startup_tokens=assembled.response["startup_tokens"],
            unit=assembled.response["unit"],
            phase=body.phase,
            tenant=assembled.record.tenant_id,
            given_tokens={
                (s.source, c["id"]): tokens
                for s in body.sources
                for c in s.items
                if (tokens := c.get("tokens"))
            },
            count_tokens=token_counter(assembled.encoding),
        )
    finally:
        if store_later is not None:
            store_later()


@router.get("/assemblies/{assembly_id}", response_model=StoredAssemblyResponse)
def get_assembly(assembly_id: str, tenant_id: TenantId, db: Db) -> Response:
    row = plans.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
    request = decode_json(row.request)
    return json_response(
        {
            "assembly_id": assembly_id,
            # The form every other timestamp of the API takes (pydantic's: UTC as `Z`).
            "created_at": row.created_at.isoformat().replace("+00:00", "Z"),
            "session_id": request.get("session_id"),
            "request": request,
            "response": {"assembly_id": assembly_id, **row.response},
            "grounding": row.grounding,
        }
    )


@router.post(
    "/assemblies/{assembly_id}/replay",
    status_code=status.HTTP_201_CREATED,
    response_model=ReplayResponse,
    responses=rule_responses("duplicate_candidate_ids", "unstorable_value"),
)
def replay_assembly(
    assembly_id: str, body: ReplayRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> ReplayResponse:
    row = plans.get_assembly(db, tenant_id=tenant_id, external_id=assembly_id)
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
    assembled = _run(
        db,
        tenant_id=tenant_id,
        request=changed,
        request_text=changed.model_dump_json(exclude_defaults=True),
        settings=settings,
        as_of_seq=row.as_of_seq,
    )
    replay_id = plans.store_now(db, assembled.record, slot=assembled.slot)
    db.commit()
    after = AssembleResponse.model_validate({"assembly_id": replay_id, **assembled.response})
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
