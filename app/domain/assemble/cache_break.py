"""Why a prompt prefix broke. Each assembly records what its prefix was built from
(`PrefixState`); the lineage's next assembly, when its reused prefix ends before the previous
assembly's history did, names one cause from a closed list (`explain_break`).

Invariants:

- A break is named exactly when the reused prefix ends before the end of the previous
  assembly's history. What follows the history (world state placed after it, the restated goal)
  moves as the history grows, so the history's end, not the assembly's, is the mark.
- The cause is one of `BreakCause`, always, and a pure function of the two states and the item
  at the break (so a replay names the same one). The order: what changes every position of the
  prompt (the output format, the tool definitions, the request's own contributions) first; then,
  in the part before the history, the goal, the world state, an exclusion notice or another
  notice; in the history, a compaction, a retraction or reset, a newly excluded item, and else
  the window's fitting, which moved its cut.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, NamedTuple, get_args

BreakCause = Literal[
    "compaction",
    "world_state",
    "goal",
    "excluded",
    "retracted",
    "window_cut",
    "tools",
    "output_format",
    "notice",
    "override",
]
BREAK_CAUSES: tuple[BreakCause, ...] = get_args(BreakCause)
_STATE_VERSION = 1
DIGEST_CHARS = 16
"""Hex digits a state keeps of a digest: 64 bits, as an item's fingerprint keeps."""


@dataclass(frozen=True)
class PrefixState:
    """What an assembly's prompt prefix was built from, as its lineage's next assembly compares
    it. Small: it is stored whole with every plan."""

    output_format: str
    tools: str | None
    """A digest of the tool definitions offered with the context (None: none)."""
    override: str
    """A digest of the request's own settings (budget, placement, policy and the rest: all but
    its sources, session, unit, phase and output format)."""
    sources: tuple[str, ...]
    """The names of the request's own sources, in order (what they contribute is told by the
    item at the break)."""
    compactions: int
    compaction_id: str | None
    retractions: int
    """The seqs retractions hid, counted."""
    reset_at: int
    goal_version: int | None
    world_version: int
    excluded: int
    """The items of the active history normalization excluded."""
    cut_seq: int | None
    """The fact seq of the first history item shown (None: no history shown)."""
    history_start: int
    """The position of the first history item (the items before it lead the prompt)."""
    history_end: int
    """The position after the last history item."""
    as_of_seq: int | None

    def stored(self) -> list[Any]:
        """Its stored form: a version number, then the values in field order but
        `compaction_id` (a break names the newer state's)."""
        values = asdict(self)
        values.pop("compaction_id")
        return [_STATE_VERSION, *values.values()]

    @classmethod
    def read(cls, stored: Any) -> PrefixState | None:
        """The state `stored` wrote; None for none, or one of another version or shape."""
        names = [f.name for f in fields(cls) if f.name != "compaction_id"]
        if not isinstance(stored, list) or stored[:1] != [_STATE_VERSION]:
            return None
        if len(stored) != len(names) + 1:
            return None
        values = dict(zip(names, stored[1:], strict=True))
        return cls(**{**values, "sources": tuple(values["sources"]), "compaction_id": None})


class BreakItem(NamedTuple):
    """The current assembly's item at the break."""

    id: str
    source: str
    seq: int | None


@dataclass(frozen=True)
class PrefixBreak:
    position: int
    item_id: str | None
    seq: int | None
    cause: BreakCause
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def frames_match(previous: PrefixState | None, current: PrefixState) -> bool:
    """Whether what a provider reads before the first item is unchanged: the tool definitions
    (sent ahead of every message) and the output format (the same items framed otherwise). When
    either changed nothing of the previous prefix is reused, whatever the items' fingerprints."""
    return previous is None or (
        previous.tools == current.tools and previous.output_format == current.output_format
    )


def explain_break(
    previous: PrefixState | None,
    current: PrefixState,
    *,
    reused_items: int,
    at: BreakItem | None,
    history_source: str,
    notice_source: str,
) -> PrefixBreak | None:
    """The break of the reused prefix (`reused_items` long) against the lineage's previous
    assembly, and its cause; None when the prefix reaches the previous history's end, or there
    is no previous state to compare with. `at` is the current item at the break (None when the
    current assembly ends there)."""
    if previous is None or reused_items >= previous.history_end:
        return None
    cause, detail = _cause(previous, current, at, reused_items, history_source, notice_source)
    return PrefixBreak(
        position=reused_items,
        item_id=at.id if at else None,
        seq=at.seq if at else None,
        cause=cause,
        detail=detail,
    )


def _cause(
    previous: PrefixState,
    current: PrefixState,
    at: BreakItem | None,
    position: int,
    history_source: str,
    notice_source: str,
) -> tuple[BreakCause, str]:
    if previous.output_format != current.output_format:
        return "output_format", (
            f"the output format changed from {previous.output_format} to {current.output_format}"
        )
    if previous.tools != current.tools:
        return "tools", "the tool definitions sent with the context changed"
    if previous.override != current.override:
        return "override", "the request's own budget, placement or settings differ from the last"
    if previous.sources != current.sources:
        return "override", (
            f"the request's own sources changed from {list(previous.sources)} to "
            f"{list(current.sources)}"
        )
    source = at.source if at else None
    if source in current.sources:
        return "override", f"the request's own source {source!r} gives other items than the last"
    leading = position < previous.history_start and source != history_source
    if leading and previous.goal_version != current.goal_version:
        return "goal", _goal_changed(previous, current)
    if leading and previous.world_version != current.world_version:
        return "world_state", (
            f"the world state changed (version {previous.world_version} to {current.world_version})"
        )
    if previous.compactions != current.compactions:
        return "compaction", (
            f"compaction {current.compaction_id} rewrote the history after fact seq "
            f"{previous.as_of_seq}"
        )
    if previous.retractions != current.retractions or previous.reset_at != current.reset_at:
        what = "a reset" if previous.reset_at != current.reset_at else "a retraction"
        return "retracted", f"{what} after fact seq {previous.as_of_seq} hid items shown before"
    if previous.excluded != current.excluded:
        return "excluded", (
            f"{current.excluded - previous.excluded} more item(s) excluded since fact seq "
            f"{previous.as_of_seq}, and named in the notice"
        )
    if previous.cut_seq != current.cut_seq:
        return "window_cut", (
            f"the window's fitting moved its cut: the history shown starts at fact seq "
            f"{current.cut_seq}, not {previous.cut_seq}"
        )
    if leading or source == notice_source:
        return "notice", "the service's notice of what the context leaves out changed"
    if not leading and previous.goal_version != current.goal_version:
        return "goal", _goal_changed(previous, current)
    if not leading and previous.world_version != current.world_version:
        return "world_state", "the world state changed"
    return "window_cut", "the window's fitting kept other items or cut them otherwise"


def _goal_changed(previous: PrefixState, current: PrefixState) -> str:
    return f"the goal changed (version {previous.goal_version} to {current.goal_version})"
