"""What one assembly answers and stores, once its plan is made (`app.usecases.assemble`): its
prefix compared with the lineage's previous call's, its rendering for the provider, the answer,
and the record of its plan that storage writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, NamedTuple

from app.contract.assembly import AssembleAnswer, AssembleRequest
from app.domain.advice import Advice
from app.domain.assemble import (
    HISTORY_SOURCE,
    AssemblyPlan,
    PrefixBreak,
    PrefixState,
    ReusedPrefix,
    explain_break,
    frames_match,
    reused_prefix,
)
from app.domain.assemble.model import SelectedItem
from app.domain.assemble.rendering import render_context
from app.domain.budget import Budget
from app.domain.calibration import SessionWindow
from app.domain.elision import NOTICE_SOURCE, Elided
from app.domain.formats import Rendering, place_cache_breakpoints
from app.domain.history import HistoryEntry
from app.domain.items import Format
from app.domain.stored_plan import offered, stored_answer
from app.storage import plans
from app.storage.session_rows import SessionSnapshot
from app.tracing import annotate
from app.usecases.loaded_history import LoadedHistory
from app.usecases.plan_record import ReceivedRequest, stored_request
from app.usecases.prefix import break_item

__all__ = [
    "AssemblySetting",
    "Comparison",
    "PrefixComparer",
    "annotate_assembly",
    "answer_of_plan",
    "record_of",
    "rendered",
]


@dataclass(frozen=True)
class AssemblySetting:
    """What one assembly is assembled against: the session's history and window (None in
    stateless mode), the encoding counted in, the tools sent beside it, and the budgets."""

    loaded: LoadedHistory | None
    window: SessionWindow | None
    history: Sequence[HistoryEntry]
    """The normalized history as assembly input (state fragments left out); () stateless."""
    encoding: str
    tools: list[dict[str, Any]]
    tools_tokens: int
    budget: Budget
    selection_budget: Budget


class Comparison(NamedTuple):
    reused: ReusedPrefix
    broke: PrefixBreak | None


class PrefixComparer:
    """An assembly's reused prefix and prefix break against another's fingerprints and
    prefix state (the lineage's previous call's, or a replayed plan's original)."""

    def __init__(self, setting: AssemblySetting, plan: AssemblyPlan, state: PrefixState) -> None:
        self.setting, self.plan, self.state = setting, plan, state
        self.fingerprints = [(item.fingerprint, item.tokens) for item in plan.items]

    def __call__(
        self, previous: Sequence[tuple[str, int]], previous_state: PrefixState | None
    ) -> Comparison:
        reused = reused_prefix(previous, self.fingerprints)
        if not frames_match(previous_state, self.state):
            reused = ReusedPrefix(items=0, tokens=0)
        broke = explain_break(
            previous_state,
            self.state,
            reused_items=reused.items,
            at=break_item(self.setting.history, self.plan, reused.items),
            history_source=HISTORY_SOURCE,
            notice_source=NOTICE_SOURCE,
        )
        return Comparison(reused, broke)


def rendered(
    plan: AssemblyPlan, fmt: Format, *, reused: ReusedPrefix
) -> tuple[Rendering, list[dict[str, Any]]]:
    """The plan's items rendered in `fmt` (`render_context`) and, for Anthropic, the cache
    breakpoints marked: the end of the stable prefix, of what the previous call shares, and of
    the history."""
    items = plan.items
    rendered = render_context(((item.item, item.content) for item in items), fmt)
    if fmt != "anthropic":
        return rendered, []
    prefix_end = next((i for i, it in enumerate(items) if it.layer != "prefix"), len(items))
    history = [i for i, it in enumerate(items) if it.source == HISTORY_SOURCE]
    return place_cache_breakpoints(
        rendered,
        [it.id for it in items],
        stable_prefix=prefix_end - 1,
        previous_call=reused.items - 1,
        history_end=history[-1] if history else -1,
    )


def answer_of_plan(
    setting: AssemblySetting,
    plan: AssemblyPlan,
    *,
    request: AssembleRequest,
    unit: str | None,
    comparison: Comparison,
    advice: Advice,
    rendered: Rendering,
    breakpoints: list[dict[str, Any]],
    elided: Sequence[Elided],
    prompt_cache_key: str | None,
) -> AssembleAnswer:
    """The answer, its id aside: the plan and its items, what the cache can reuse, the advice,
    the rendering and what the context leaves out."""
    reused, broke = comparison
    window = setting.window
    return {
        "plan_hash": plan.plan_hash,
        "total_tokens": plan.total_tokens,
        "provider_tokens_estimate": (
            window.tokenizer.provider_tokens(plan.total_tokens) if window else None
        ),
        "encoding": setting.encoding,
        "tokenizer": window.tokenizer.as_dict() if window else None,
        "truncated": plan.truncated,
        "over_budget": plan.over_budget,
        "items": [answer_item(item) for item in plan.items],
        "plan": plan.plan,
        "by_source_class": plan.by_source_class,
        "cache": {
            "reused_prefix_tokens": reused.tokens,
            "new_tokens": plan.total_tokens - reused.tokens,
            "reused_prefix_items": reused.items,
            "last_reused_item_id": plan.items[reused.items - 1].id if reused.items else None,
            "break": broke.as_dict() if broke else None,
        },
        "advice": advice.as_dict(),
        "budget": asdict(setting.budget),
        "startup_tokens": sum(i.tokens for i in plan.items if i.layer == "prefix"),
        "unit": unit,
        "messages": rendered.items,
        "system": rendered.system,
        "cache_breakpoints": breakpoints,
        "prompt_cache_key": prompt_cache_key,
        "conversion": rendered.report(),
        "tools": setting.tools,
        "tools_tokens": setting.tools_tokens,
        "elided": [entry.as_dict() for entry in elided],
    }


def answer_item(item: SelectedItem) -> dict[str, Any]:
    return {
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


def annotate_assembly(
    request: AssembleRequest,
    plan: AssemblyPlan,
    *,
    unit: str | None,
    reused: ReusedPrefix,
    advice: Advice,
) -> None:
    annotate(
        lambda: {
            "gen_ai.conversation.id": request.session_id,
            "contextd.unit": unit,
            "contextd.output_format": request.output_format,
            "contextd.tokens.offered": sum(entry["tokens"] for entry in plan.plan),
            "contextd.tokens.selected": plan.total_tokens,
            "contextd.cache.reused_prefix_tokens": reused.tokens,
            "contextd.advice.should_compact": advice.should_compact,
        }
    )


def record_of(
    *,
    tenant_id: int,
    session: SessionSnapshot | None,
    setting: AssemblySetting,
    request: AssembleRequest,
    received: ReceivedRequest,
    answer: AssembleAnswer,
    compare: PrefixComparer,
    now: datetime,
) -> plans.NewAssembly:
    """What is stored of an assembly: the request as the plan keeps it, the answer in its
    stored form, the fingerprints and the prefix state its successor compares against."""
    loaded = setting.loaded
    request_kept, bodies = stored_request(request, received)
    return plans.NewAssembly(
        tenant_id=tenant_id,
        session_pk=session.id if session else None,
        as_of_seq=loaded.active.last_seq if loaded else None,
        unit=answer["unit"],
        phase=request.phase,
        plan_hash=answer["plan_hash"],
        request=request_kept,
        response=stored_answer(
            answer,
            output_format=request.output_format,
            history_from=None
            if loaded is None
            else {
                "encoding": setting.encoding,
                "input_modalities": sorted(loaded.input_modalities),
            },
            candidates=offered(received.value),
        ),
        fingerprints=[list(pair) for pair in compare.fingerprints],
        bodies=bodies,
        prefix_state=compare.state.stored(),
        created_at=now,
    )
