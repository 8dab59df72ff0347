"""The loss check: the facts a lossy strategy must keep, and which of them a new history lost.

A fact is kept iff its text is a substring of the new history's visible text, so a check never
depends on how a record words it. `find_lost_facts` says which facts are required.

`find_lost_identifiers` measures more widely, over every identifier of the covered range: one
is still findable when its text is visible, when an item showing it is kept verbatim, or when
such an item was replaced by a placeholder naming it as "fact seq N" (every placeholder and
record names a fact of the log that way), since the agent can fetch that fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.compaction.extraction import identifiers, request_needle, scan_entries
from app.domain.compaction.model import Identifier
from app.domain.history import HistoryEntry
from app.domain.items import visible_text

_NAMED_FACT = re.compile(r"\bfact seq (\d+)\b")


@dataclass(frozen=True)
class RequiredFact:
    label: str
    needle: str


def required_facts(
    covered: Sequence[HistoryEntry], *, new_history: Sequence[HistoryEntry], goal: str | None
) -> list[RequiredFact]:
    facts = [RequiredFact("goal", goal)] if goal else []
    scan = scan_entries(covered)
    if scan.user_requests:
        seq, text = scan.user_requests[-1]
        kept = [s for s, _ in scan_entries(new_history).user_requests]
        # A later request kept verbatim supersedes it; an unknown order (no seq) does not.
        superseded = bool(kept) and kept[-1] is not None and seq is not None and kept[-1] > seq
        if text and not superseded:
            facts.append(RequiredFact("latest user request", request_needle(text)))
    facts.extend(RequiredFact(f"file {path}", path) for path in scan.paths)
    if unresolved := scan.unresolved():
        facts.append(RequiredFact(f"error {unresolved[-1][1]}", unresolved[-1][1]))
    return facts


def missing_facts(
    facts: Sequence[RequiredFact], history: Sequence[HistoryEntry]
) -> list[RequiredFact]:
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


def find_lost_identifiers(
    *, covered: Sequence[HistoryEntry], new_history: Sequence[HistoryEntry]
) -> tuple[Identifier, ...]:
    """The identifiers of `covered` (see `identifiers`) the agent can no longer find in
    `new_history`: not visible there, no item showing it kept verbatim, and none replaced by a
    placeholder (a changed item keeping its seq) that names it as a fact to fetch."""
    seen = "\n".join(visible_text(entry.item) for entry in new_history)
    reachable = {
        seq
        for entry in new_history
        if entry.seq is not None
        for seq in (
            [entry.seq]
            if entry.verbatim
            else map(int, _NAMED_FACT.findall(visible_text(entry.item)))
        )
    }
    return tuple(
        identifier
        for identifier in identifiers(covered)
        if identifier.text not in seen and reachable.isdisjoint(identifier.seqs)
    )
