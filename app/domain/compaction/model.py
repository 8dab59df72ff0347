"""The vocabulary of compaction: the strategies, what each declares it drops and keeps, the
records a compaction writes (summary, notes, handoff) and its input and result.

Plain frozen data; the modules beside this one compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from app.domain.errors import ContextdError
from app.domain.history import HistoryEntry
from app.domain.items import Item

Strategy = Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"]
ProductKind = Literal["summary", "handoff", "notes"]
PRODUCT_STRATEGIES: tuple[ProductKind, ...] = get_args(ProductKind)
"""The strategies that write a product record (and so can use a summarizer's narrative)."""
Summarizer = Literal["builtin", "llm", "client"]
NotAppliedReason = Literal["dry_run", "stateless", "noop", "too_little_gain"]
"""Why `/compact` wrote nothing."""

SUMMARY_MARKER = "[contextd:summary]"
HANDOFF_MARKER = "[contextd:handoff]"
NOTES_MARKER = "[contextd:notes]"

# Caps keep a record small across many merges; the newest entries are kept.
MAX_COMMANDS = 150
MAX_DECISIONS = 12
MAX_ERRORS = 10
MAX_VERIFICATION = 10
MAX_NEXT_STEPS = 5
MAX_OPEN_QUESTIONS = 5
MAX_LESSONS = 8
MAX_REFERENCES = 20

_SHORTENED = (
    "when the record would not fit what target_tokens leaves it (at least a third of the"
    " target), the oldest entries of its lists, the agent's bookkeeping before the user's"
    " words, files and errors; the record names each list it shortened"
)
DECLARATIONS: dict[Strategy, dict[str, list[str]]] = {
    "clear_tool_results": {
        "drops": [
            "the bodies of tool outputs older than the newest keep_recent outputs, each replaced"
            " by a placeholder naming the fact seq that holds it",
            "with clear_tool_inputs, the arguments of those outputs' calls (function arguments"
            " become {})",
        ],
        "keeps": [
            "every message, reasoning item and call, in order",
            "the newest keep_recent tool outputs and every output of an excluded tool",
            "the invariants at the top and any earlier compaction record",
        ],
    },
    "truncate": {
        "drops": ["the oldest items, cut only between complete call batches"],
        "keeps": [
            "the invariants at the top and any earlier compaction record",
            "the newest items that fit target_tokens (at least keep_recent items)",
            "the latest user message, verbatim",
            "older items the loss check needs (goal, files, latest unresolved error), verbatim",
        ],
    },
    "summary": {
        "drops": [
            "the items older than the working set, replaced by one summary record",
            _SHORTENED,
        ],
        "keeps": [
            "the invariants at the top",
            "a summary record: the goal verbatim, the user's requests in their own words, files,"
            " commands with outcomes, unresolved errors, verification results, and the agent's"
            " last state and next steps (attributed to the agent)",
            "the working set verbatim: the newest turn (at least keep_recent items) and older"
            " items the loss check needs",
        ],
    },
    "handoff": {
        "drops": [
            "the items older than the newest turn, externalized into one handoff record",
            _SHORTENED,
        ],
        "keeps": [
            "the invariants at the top",
            "a handoff record: the summary, fact seqs to fetch from the log, and lessons from"
            " failed attempts",
            "the newest turn verbatim, and older items the loss check needs",
        ],
    },
    "notes": {
        "drops": [
            "the items older than the newest turns, distilled into one notes record",
            _SHORTENED,
        ],
        "keeps": [
            "the invariants at the top",
            "a notes record merged with earlier notes: the goal verbatim, facts (with the user's"
            " requests in their own words), commands with outcomes, decisions, open questions and"
            " next steps",
            "the newest turns verbatim, and older items the loss check needs",
        ],
    },
}


class CompactionBroken(ContextdError):
    """A strategy produced a history that breaks call/output pairing; nothing is emitted."""

    code = "compaction_broken"


DEFAULT_KEEP_RECENT = 3
"""The newest tool outputs (or items) a compaction keeps whole unless asked otherwise: the
default of the wire model and of the core alike."""


@dataclass(frozen=True)
class CompactionParams:
    keep_recent: int = DEFAULT_KEEP_RECENT
    clear_at_least_tokens: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    target_tokens: int | None = None
    summarizer: Summarizer = "builtin"


@dataclass(frozen=True)
class Summary:
    """The narrative half of a compaction; every list in source order, deduplicated."""

    goal: str | None
    user_requests: tuple[str, ...]
    decisions: tuple[str, ...]
    files: tuple[str, ...]
    commands: tuple[str, ...]
    errors: tuple[str, ...]
    verification: tuple[str, ...]
    state: str | None
    next_steps: tuple[str, ...]
    from_seq: int | None
    to_seq: int | None
    narrative: str | None = None
    """Text from an `llm` or `client` summarizer, goal claims removed; None for builtin."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "user_requests": list(self.user_requests),
            "decisions": list(self.decisions),
            "files": list(self.files),
            "commands": list(self.commands),
            "errors": list(self.errors),
            "verification": list(self.verification),
            "state": self.state,
            "next_steps": list(self.next_steps),
            "source_range": {"from_seq": self.from_seq, "to_seq": self.to_seq},
            "narrative": self.narrative,
        }


@dataclass(frozen=True)
class Notes:
    """Structured notes, merged across compactions and deduplicated."""

    facts: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    """Commands and tool calls with their outcomes, the newest `MAX_COMMANDS`."""
    decisions: tuple[str, ...] = ()
    open_questions: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "facts": list(self.facts),
            "commands": list(self.commands),
            "decisions": list(self.decisions),
            "open_questions": list(self.open_questions),
            "next_steps": list(self.next_steps),
        }


@dataclass(frozen=True)
class Handoff:
    """What a handoff adds to its summary: where to look in the log, and what did not work."""

    references: tuple[str, ...] = ()
    lessons: tuple[str, ...] = ()


IdentifierKind = Literal["path", "command", "error"]


@dataclass(frozen=True)
class Identifier:
    """A file path, shell command or error signature a range of history shows."""

    kind: IdentifierKind
    text: str
    seqs: tuple[int, ...]
    """The items of the range that show it, oldest first."""


@dataclass(frozen=True)
class Trail:
    """The names and ids the agent used in what records cover (see `compaction.trail`)."""

    groups: tuple[tuple[int, tuple[str, ...]], ...] = ()
    """(fact seq of their last use, names), oldest first."""
    left_out: tuple[int, int] | None = None
    """The span of fact seqs where the names left out for space were last used."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, names in self.groups for name in names)


@dataclass(frozen=True)
class CompactionInput:
    history: tuple[HistoryEntry, ...]
    """The active history, normalized and chronological; may start with an earlier product."""
    strategy: Strategy
    params: CompactionParams
    goal: str | None
    invariants: tuple[Item, ...] = ()
    previous_summary: Summary | None = None
    previous_notes: Notes | None = None
    summary_text: str | None = None
    pinned_notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactionResult:
    strategy: Strategy
    """The strategy actually applied (clear_tool_results after a fallback)."""
    declares: dict[str, list[str]]
    tokens_before: int
    tokens_after: int
    history: tuple[HistoryEntry, ...]
    summary: Summary | None
    notes: Notes | None
    working_set: tuple[tuple[int, str], ...]
    loss_missing: tuple[str, ...]
    fell_back: bool
    covered: tuple[int, int] | None
    is_noop: bool
    handoff: Handoff | None = None
    pinned_notes: tuple[str, ...] = field(default=())
    target_tokens: int | None = None
    """The target the strategy compacted toward: the given one, else half the history for the
    lossy strategies; None for clear_tool_results without one."""
    identifiers_found: int = 0
    """File paths, shell commands and error signatures of the covered range (`identifiers`)."""
    identifiers_lost: tuple[Identifier, ...] = ()
    """Those the new history no longer lets the agent find (`find_lost_identifiers`)."""
    over_target: str | None = None
    """Why the new history is over the target despite everything the strategy may do; None
    when it is within (or no target applies)."""

    def frees_at_least(self, share: float) -> bool:
        """Whether the new history is smaller than the old by at least `share` of it: a
        compaction that frees less costs a prompt-cache rewrite for too little."""
        return self.tokens_before - self.tokens_after >= share * self.tokens_before
