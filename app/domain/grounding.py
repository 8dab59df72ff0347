"""Next-action grounding: did the context a model call received still hold what it went on to use.

One measure, two takers: `bench/replay.py` takes it offline over recorded
runs, the service live on every model output appended after an assembly (`grade_action`).

A model call's *next action* is the run of model-output items it produced; the identifiers of
that action (paths, file names, snake_case, camelCase, dotted names, codes, long numbers) that
also occur in the history before the call, and are not the goal's, are what the call *needed*.
A needed identifier is *visible* when it occurs in the text of the messages the call received,
*recallable* when it is not visible but occurs in the text of a fact the context lists as elided.

Pure functions over plain data: no I/O, and every pattern is linear (each one starts only where
its run of characters starts, and has no nested quantifier), so a megabyte of tool output cannot
make extraction slow.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SKIPPED_KEYS = frozenset(
    {
        "type",
        "role",
        "id",
        "call_id",
        "status",
        "tool_call_id",
        "tool_use_id",
        "signature",
        "encrypted_content",
        "annotations",
    }
)
"""Keys whose strings the model does not read as content: transport, pairing and opaque fields."""

MIN_LENGTH = 4
STRIPPED = "./-"

FILE_EXTENSIONS = (
    "py|pyi|pyx|ipynb|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|rst|txt|log|yaml|yml|toml|ini|cfg|conf"
    "|env|lock|sh|bash|zsh|ps1|sql|csv|tsv|xml|html|htm|css|scss|rs|go|java|kt|kts|scala|swift"
    "|c|h|cc|cpp|cxx|hpp|hh|cs|rb|php|pl|lua|r|m|mm|vue|svelte|proto|gradle|mk|cmake|tf|hcl"
    "|dart|patch|diff|out|err"
)
"""The extensions that make a bare word a file name (`debug.log`): source, config, doc and log
files, as alternatives of a regular expression."""
PATH = re.compile(r"(?<![\w./-])[\w./-]*/[\w./-]*", re.ASCII)
"""A whole run of path characters that holds a `/`."""
PATTERNS = (
    PATH,
    # A bare file name with a common source, config or doc extension.
    re.compile(rf"(?<![\w.-])[\w.-]*\.(?:{FILE_EXTENSIONS})(?!\w)", re.ASCII),
    # snake_case: a word of a letter or `_`, then an inner `_`, holding a letter.
    re.compile(r"(?<!\w)(?=\w*[A-Za-z])[A-Za-z_]\w*_\w*", re.ASCII),
    # camelCase and PascalCase: a word with a capital after its first character, and a lower.
    re.compile(r"(?<!\w)(?=\w*[a-z])[A-Za-z_]\w*[A-Z]\w*", re.ASCII),
    # Dotted names, from the first part of the name (not from inside one).
    re.compile(r"(?<!\w)(?<!\w\.)[A-Za-z_]\w*\.\w[\w.]*", re.ASCII),
    # Codes: 5+ alphanumerics holding a digit and a letter.
    re.compile(
        r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{5,}", re.ASCII
    ),
    # Numbers of 4+ digits.
    re.compile(r"(?<![A-Za-z0-9])[0-9]{4,}(?![A-Za-z0-9])", re.ASCII),
)

ESCAPE = re.compile(r'(?<!\\)\\+(?:u[0-9A-Fa-f]{4}|["/bfnrt])')
"""A string escape, JSON's or source code's (and a source escape inside JSON, `\\\\n`): call
arguments are JSON text, and the `n` of a `\\n` would otherwise start a word (`\\nEOF` names no
identifier `nEOF`)."""

SEQ_MENTION = r"\bseqs? {}\b"
"""How the visible text names an elided fact: "fact seq 12", "fact seqs 12–40"."""


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for element in value:
            yield from _strings(element)
    elif isinstance(value, dict):
        for key, element in value.items():
            if key not in SKIPPED_KEYS:
                yield from _strings(element)


def item_text(item: object) -> str:
    """Every string the model sees in `item` (message text, call name and arguments, tool
    output), walked through lists and objects, skipping `SKIPPED_KEYS`; joined by newlines."""
    return "\n".join(_strings(item))


def items_text(items: Sequence[object]) -> str:
    """The text of each item, joined by newlines."""
    return "\n".join(item_text(item) for item in items)


def extract_identifiers(text: str) -> frozenset[str]:
    """The identifiers of `text`: the union of what every pattern of `PATTERNS` finds (string
    escapes read as separators), each stripped of leading and trailing `.`, `/`, `-` and kept
    when `MIN_LENGTH` characters or longer (a path only while it still holds a `/`)."""
    found: set[str] = set()
    words = ESCAPE.sub(" ", text)
    for pattern in PATTERNS:
        for match in pattern.finditer(words):
            identifier = match.group().strip(STRIPPED)
            if len(identifier) >= MIN_LENGTH and (pattern is not PATH or "/" in identifier):
                found.add(identifier)
    return frozenset(found)


def needed_identifiers(action: str, *, history: str, goal: str) -> frozenset[str]:
    """The identifiers of the next action's text `action` that occur in the text of the history
    before the call, less the goal's: its identifiers and any substring of it (every manager
    keeps the goal, so they tell nothing about the context)."""
    goal_identifiers = extract_identifiers(goal)
    return frozenset(
        identifier
        for identifier in extract_identifiers(action)
        if identifier in history and identifier not in goal_identifiers and identifier not in goal
    )


@dataclass(frozen=True)
class Grounding:
    """What one call needed, and how much of it its context held.

    `recallable` maps each needed identifier that is not visible but occurs in an elided fact's
    text to the index (in the `elided` given to `ground`) of the first such fact.
    """

    needed: frozenset[str]
    visible: frozenset[str]
    recallable: dict[str, int]

    @property
    def is_all_visible(self) -> bool:
        return self.visible == self.needed


def ground(needed: frozenset[str], *, shown: str, elided: Sequence[str]) -> Grounding:
    """Score `needed` against the text `shown` to the model and the texts of the `elided` facts."""
    visible = frozenset(identifier for identifier in needed if identifier in shown)
    recallable: dict[str, int] = {}
    for identifier in sorted(needed - visible):
        index = next((n for n, text in enumerate(elided) if identifier in text), None)
        if index is not None:
            recallable[identifier] = index
    return Grounding(needed=needed, visible=visible, recallable=recallable)


MAX_GRADED_IDENTIFIERS = 5_000
"""The identifiers of one action graded live at most (the first, sorted); the rest are counted
as `ungraded`. An action naming more is not an agent's next step but a dump."""

ABSENT = "absent"
"""The form of a miss no elided fact holds: the context neither showed nor listed it."""
MAX_MISSED_NAMED = 20


@dataclass(frozen=True)
class ActionGrounding:
    """How one assembly served the next action its model took (the online figure).

    Of the `needed` identifiers, `visible` ones were in the text the assembly showed,
    `recallable` ones only in a fact it listed as elided (one recall away), and `neither` in
    neither (the history held them, the context did not say where). `misses` counts the
    identifiers that were not visible by the form of the elided range holding them (`ABSENT`
    for `neither`); `missed` names the first `MAX_MISSED_NAMED` of them, sorted.
    """

    needed: int
    visible: int
    recallable: int
    neither: int
    misses: dict[str, int]
    missed: tuple[str, ...]
    ungraded: int = 0
    """Identifiers of the action left ungraded beyond `MAX_GRADED_IDENTIFIERS`."""

    @property
    def is_all_visible(self) -> bool:
        return self.visible == self.needed

    def as_dict(self) -> dict[str, object]:
        return {
            "needed": self.needed,
            "visible": self.visible,
            "recallable": self.recallable,
            "neither": self.neither,
            "all_visible": self.is_all_visible,
            "misses_by_form": dict(sorted(self.misses.items())),
            "missed": list(self.missed),
            "ungraded": self.ungraded,
        }


def grade_action(
    action: Sequence[object],
    *,
    history: Sequence[object],
    shown: str,
    elided: Sequence[tuple[str, str]],
    goal: str,
) -> ActionGrounding:
    """Grade the model output items `action` against what its assembly showed (`shown`, the
    text of what it sent) and listed as elided (`(form, text of the range's facts)` each), out
    of the `history` before the call: the offline measure of `bench/replay.py`, taken live."""
    needed = needed_identifiers(items_text(action), history=items_text(history), goal=goal)
    scored = ground(needed, shown=shown, elided=[text for _, text in elided])
    return action_grounding(scored, forms=[form for form, _ in elided])


def action_grounding(
    scored: Grounding, *, forms: Sequence[str], ungraded: int = 0
) -> ActionGrounding:
    """The online figure of `scored`, whose recallable identifiers index the elided ranges
    whose `forms` are given."""
    misses: dict[str, int] = {}
    for identifier in scored.needed - scored.visible:
        index = scored.recallable.get(identifier)
        form = forms[index] if index is not None else ABSENT
        misses[form] = misses.get(form, 0) + 1
    missed = sorted(scored.needed - scored.visible)
    return ActionGrounding(
        needed=len(scored.needed),
        visible=len(scored.visible),
        recallable=len(scored.recallable),
        neither=len(scored.needed) - len(scored.visible) - len(scored.recallable),
        misses=misses,
        missed=tuple(missed[:MAX_MISSED_NAMED]),
        ungraded=ungraded,
    )


def names_every_seq(shown: str, first_seqs: Sequence[int]) -> bool:
    """Whether `shown` names each of `first_seqs` as "seq N" or "seqs N"."""
    return all(re.search(SEQ_MENTION.format(seq), shown) for seq in first_seqs)
