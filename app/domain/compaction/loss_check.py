"""The loss check: the facts a lossy strategy must keep, and which of them a new history lost.

A fact is kept iff its text is a substring of the new history's visible text, so a check never
depends on how a record words it. `find_lost_facts` says which facts are required.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.compaction.extraction import scan_entries
from app.domain.history import HistoryEntry
from app.domain.items import visible_text


@dataclass(frozen=True)
class _Fact:
    label: str
    needle: str


def required_facts(
    covered: Sequence[HistoryEntry], *, new_history: Sequence[HistoryEntry], goal: str | None
) -> list[_Fact]:
    facts = [_Fact("goal", goal)] if goal else []
    scan = scan_entries(covered)
    if scan.user_requests:
        seq, text = scan.user_requests[-1]
        kept = [s for s, _ in scan_entries(new_history).user_requests]
        # A later request kept verbatim supersedes it; an unknown order (no seq) does not.
        superseded = bool(kept) and kept[-1] is not None and seq is not None and kept[-1] > seq
        if text and not superseded:
            facts.append(_Fact("latest user request", text))
    facts.extend(_Fact(f"file {path}", path) for path in scan.paths)
    if unresolved := scan.unresolved():
        facts.append(_Fact(f"error {unresolved[-1][1]}", unresolved[-1][1]))
    return facts


def missing_facts(facts: Sequence[_Fact], history: Sequence[HistoryEntry]) -> list[_Fact]:
    seen = "\n".join(visible_text(entry.item) for entry in history)
    return [fact for fact in facts if fact.needle not in seen]


def find_lost_facts(
    *, covered: Sequence[HistoryEntry], new_history: Sequence[HistoryEntry], goal: str | None
) -> tuple[str, ...]:
    """What the loss check misses in `new_history` after compacting `covered`, as labels.

    Required: the goal; the latest user request of `covered` unless `new_history` keeps a later
    one; every file path touched in `covered`; the latest unresolved error signature of
    `covered`. Each must be a substring of the new history's visible text.
    """
    facts = required_facts(covered, new_history=new_history, goal=goal)
    return tuple(fact.label for fact in missing_facts(facts, new_history))
