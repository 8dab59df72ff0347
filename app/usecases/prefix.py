"""What an assembly's prompt prefix is built from (`PrefixState`), read off the request, the
session's history and the plan, and the item a break falls on: for `app.usecases.assemble` to
name why a lineage's reused prefix broke (`app.domain.assemble.cache_break`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.contract.assembly import AssembleRequest
from app.domain.assemble import HISTORY_SOURCE, AssemblyPlan, BreakItem, PrefixState
from app.domain.assemble.cache_break import DIGEST_CHARS
from app.domain.assemble.model import canonical_hash
from app.domain.history import HistoryEntry
from app.usecases.loaded_history import LoadedHistory

__all__ = ["break_item", "prefix_state"]

_NOT_SETTINGS = frozenset({"session_id", "unit", "phase", "output_format", "sources"})
"""Request fields outside `PrefixState.override`: the lineage's own, the format (its own
cause), the sources (named in `PrefixState.sources`, their items told by the break's item)."""


def prefix_state(
    request: AssembleRequest,
    *,
    loaded: LoadedHistory | None,
    tools: list[dict[str, Any]],
    history: Sequence[HistoryEntry],
    plan: AssemblyPlan,
) -> PrefixState:
    """What this assembly's prompt prefix is built from, for the lineage's next one."""
    shown = [n for n, item in enumerate(plan.items) if item.source == HISTORY_SOURCE]
    active = loaded.active if loaded else None
    # As validated, defaults filled in: a setting left out equals the same one given.
    settings = request.model_dump(mode="json", exclude=set(_NOT_SETTINGS))
    return PrefixState(
        output_format=request.output_format,
        tools=canonical_hash(tools)[:DIGEST_CHARS] if tools else None,
        override=canonical_hash(settings)[:DIGEST_CHARS],
        sources=tuple(source.source for source in request.sources),
        compactions=active.compactions if active else 0,
        compaction_id=active.compaction_id if active else None,
        retractions=len(active.retracted) if active else 0,
        reset_at=active.reset_at if active else 0,
        goal_version=active.goal.version if active and active.goal else None,
        world_version=active.world_state.version if active else 0,
        excluded=loaded.view.excluded_count if loaded else 0,
        cut_seq=_seq_of(history, plan.items[shown[0]].id) if shown else None,
        history_start=shown[0] if shown else len(plan.items),
        history_end=shown[-1] + 1 if shown else len(plan.items),
        as_of_seq=active.last_seq if active else None,
    )


def break_item(
    history: Sequence[HistoryEntry], plan: AssemblyPlan, position: int
) -> BreakItem | None:
    """The plan's item at `position`, with the fact seq it stands for; None past its end."""
    if position >= len(plan.items):
        return None
    item = plan.items[position]
    seq = _seq_of(history, item.id) if item.source == HISTORY_SOURCE else None
    return BreakItem(item.id, item.source, seq)


def _seq_of(history: Sequence[HistoryEntry], item_id: str) -> int | None:
    """The fact seq of the offered history entry `item_id` (`history:<ordinal>`)."""
    _, _, ordinal = item_id.partition(":")
    if not ordinal.isdigit() or int(ordinal) >= len(history):
        return None
    entry = history[int(ordinal)]
    return entry.seq if entry.id == item_id else None
