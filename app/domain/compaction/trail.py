"""The name trail: the names and ids the agent itself used, carried across compactions.

A compaction record's narrative tells what happened; the trail is what the model navigates by:
the paths, function and class names, dotted names, ids and codes the agent wrote in its own calls,
messages and reasoning (`app.domain.grounding.extract_identifiers`), grouped by the fact seq of
their last use. Invariants:

- Deterministic: a pure function of the covered entries, the earlier trail, the text the record
  already shows, the budget and the counter.
- Ranked by use, then recency: a name the agent used more than once (or one an earlier record
  carried) before a name used once, the newer before the older, then names only tool outputs
  showed (two or more of them before one); ties longest first, then by name. The names that
  fit the budget are kept;
  a name another kept name contains is shown by it and not repeated.
- Never silently dropped: names left out for space are named by the span of fact seqs of their
  last use (`Trail.left_out`), merged across compactions, so a recall search of that span finds
  them.
- The goal's names, and names the rest of the record already shows, are not repeated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.domain.compaction.model import Trail
from app.domain.grounding import extract_identifiers, item_text
from app.domain.history import HistoryEntry
from app.domain.items import OUTPUT_TYPES, is_model_output, item_type
from app.domain.text_search import Strings

_CARRIED_USES = 2
"""What a name an earlier record carried counts as: it was kept once already."""
_GROUP_TOKENS = 5
"""About what a group's `seq N: ` and its bullet cost."""


@dataclass(frozen=True)
class NameUse:
    uses: int
    """Model output items naming it (an earlier record's names count `_CARRIED_USES`); a name
    only tool outputs show counts 0 when two or more show it, else -1: after every name the
    agent wrote."""
    last_seq: int


def name_uses(covered: Sequence[HistoryEntry], previous: Trail | None) -> dict[str, NameUse]:
    """The trail's candidates: every name of `covered` and `previous` with its use."""
    found: dict[str, NameUse] = {}
    if previous is not None:
        for seq, names in previous.groups:
            for name in names:
                found[name] = NameUse(_CARRIED_USES, seq)
    seen: dict[str, NameUse] = {}
    for entry in covered:
        if entry.seq is None:
            continue
        if not is_model_output(entry.item):
            if item_type(entry.item) in OUTPUT_TYPES:
                for name in extract_identifiers(item_text(entry.item)):
                    before = seen.get(name)
                    seen[name] = NameUse((before.uses if before else 0) + 1, entry.seq)
            continue
        for name in extract_identifiers(item_text(entry.item)):
            before = found.get(name)
            found[name] = NameUse((before.uses if before else 0) + 1, entry.seq)
    for name, use in seen.items():
        if name not in found:
            found[name] = NameUse(0 if use.uses >= 2 else -1, use.last_seq)
    return found


def build_trail(
    uses: dict[str, NameUse],
    *,
    previous: Trail | None,
    shown: str,
    budget: int,
    count: Callable[[str], int],
) -> Trail:
    """The trail of the names `uses` ranks (`name_uses` of the covered range and `previous`),
    within about `budget` tokens; `shown` is the text the record (goal included) shows besides
    it. Linear in the names and the texts searched: which names a text holds is found in one
    pass over it (`app.domain.text_search`), not by searching the text once per name."""
    already = Strings(uses).within(shown)
    ranked = sorted(
        (name for name in uses if name not in already),
        key=lambda name: (
            -min(uses[name].uses, _CARRIED_USES),
            -uses[name].last_seq,
            -len(name),  # a name before the names it contains
            name,
        ),
    )
    names = Strings(ranked)
    kept: list[str] = []
    contained: set[str] = set()  # names a kept name contains: it shows them
    spent = 0
    groups: set[int] = set()
    left_out = list(previous.left_out or ()) if previous is not None else []
    # A name contained in one kept before it is skipped; one contained in a name kept after it
    # (a lower rank) goes at the end.
    for name in ranked:
        if name in contained:
            continue
        seq = uses[name].last_seq
        cost = count(f" {name},") + (0 if seq in groups else _GROUP_TOKENS)
        if spent + cost > budget:
            left_out.append(seq)
            continue
        kept.append(name)
        contained |= names.within(name)
        groups.add(seq)
        spent += cost
    kept_names = Strings(kept)
    inside_another = {inner for name in kept for inner in kept_names.within(name) if inner != name}
    kept = [name for name in kept if name not in inside_another]
    by_seq: dict[int, list[str]] = {}
    for name in sorted(kept, key=lambda name: (uses[name].last_seq, name)):
        by_seq.setdefault(uses[name].last_seq, []).append(name)
    return Trail(
        groups=tuple((seq, tuple(names)) for seq, names in by_seq.items()),
        left_out=(min(left_out), max(left_out)) if left_out else None,
    )


_GROUP = re.compile(r"seq (\d+): (\S.*)")
_LEFT_OUT = re.compile(r"left out for space: names last used in fact seqs? (\d+)(?:–(\d+))?")


def trail_entries(trail: Trail) -> tuple[str, ...]:
    """The trail as a record's list entries: one per group, then the left-out span."""
    entries = [f"seq {seq}: {', '.join(names)}" for seq, names in trail.groups]
    if trail.left_out is not None:
        first, last = trail.left_out
        span = f"seqs {first}–{last}" if last > first else f"seq {first}"
        entries.append(f"left out for space: names last used in fact {span}")
    return tuple(entries)


def read_trail(entries: Sequence[str]) -> Trail | None:
    """The trail `trail_entries` wrote, read back; None when an entry is not one of its."""
    groups: list[tuple[int, tuple[str, ...]]] = []
    left_out: tuple[int, int] | None = None
    for entry in entries:
        if match := _GROUP.fullmatch(entry):
            groups.append((int(match.group(1)), tuple(match.group(2).split(", "))))
        elif match := _LEFT_OUT.fullmatch(entry):
            left_out = (int(match.group(1)), int(match.group(2) or match.group(1)))
        else:
            return None
    return Trail(groups=tuple(groups), left_out=left_out)
