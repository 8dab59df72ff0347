"""Product items: the record a compaction writes into the history, and reading it back.

A product item is a `user` message with one `input_text` part. User, not developer, because its
text is drawn from the transcript, tool outputs included, which must never gain instruction
authority (the authoritative goal and rules are the invariants above it), and because
Anthropic's format carries developer messages only as the system prompt. Its text is

    <marker>\\n<preamble>            marker: SUMMARY_MARKER, HANDOFF_MARKER or NOTES_MARKER
    \\n\\n## <heading>\\n<text>       a single-text section (goal, narrative, state)
    \\n\\n## <heading>\\n- <entry>…   a list section, one "- " line per entry
    \\n\\n```json\\n<meta>\\n```      kind, version, range, and only what the text cannot say

Every entry is written raw (the goal and the user's words stay verbatim substrings; a goal
pinned above the record is named in the preamble, not repeated). An entry ends at the end of
its line, and the meta gives the length in code points of each entry that holds a line break,
so `read_product` (and `summary_of` / `notes_of`) read the record back exactly, whatever the
entries contain. Empty sections are left out. A record over its budget is shortened by
`fit_product` before it is written.

The record is paid for on every call after the compaction, so its frame is kept small: a
one-sentence preamble and a meta that lists only multi-line entries, the parts a record carries
beyond its kind's own and a summary range that differs from the record's. Records written in the
first format (version 1: a longer preamble, a goal section naming the pinned goal, every entry's
length in the meta) are still read back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.domain.compaction.model import (
    HANDOFF_MARKER,
    NOTES_MARKER,
    SUMMARY_MARKER,
    Handoff,
    Notes,
    ProductKind,
    Summary,
    Trail,
)
from app.domain.compaction.trail import read_trail, trail_entries
from app.domain.items import Item, item_tokens, item_type, visible_text

_MARKERS: dict[ProductKind, str] = {
    "summary": SUMMARY_MARKER,
    "handoff": HANDOFF_MARKER,
    "notes": NOTES_MARKER,
}
_PRODUCT_VERSION = 2
_OWN_PARTS: dict[ProductKind, tuple[str, ...]] = {
    "summary": ("summary",),
    "handoff": ("summary", "handoff"),
    "notes": ("notes",),
}
"""The parts a record of each kind carries unless its meta says otherwise."""
_META_FENCE = "\n\n```json\n"


@dataclass(frozen=True)
class Product:
    """What a product item records: `render_product` writes it, `read_product` reads it back."""

    kind: ProductKind
    goal: str | None
    summary: Summary | None
    notes: Notes | None
    handoff: Handoff | None
    pinned: tuple[str, ...]
    source_range: tuple[int | None, int | None]
    goal_pinned: bool = False
    """The goal is pinned verbatim above the record (a session's invariants): the record points
    at it instead of repeating it, so that its tokens are not paid twice on every call. Its
    goal and its summary's goal are then None."""
    omitted: tuple[str, ...] = ()
    """Keys of the list sections whose oldest entries this record, or one it was merged from,
    left out to fit its budget (`fit_product`); the items they came from are in its range."""
    trail: Trail | None = None
    """The names and ids the agent used in the range it covers (`compaction.trail`)."""


GOAL_PINNED_ABOVE = "The goal is pinned above, not repeated here."
"""What a record's preamble says when the invariants above it pin the goal verbatim."""
_V1_GOAL_PINNED_ABOVE = "Pinned verbatim at the top of this context; not repeated here."

# (key, heading, is_list), in rendering order. The preamble says whose words are whose, so the
# headings stay short.
_SECTIONS: tuple[tuple[str, str, bool], ...] = (
    ("goal", "Goal (pinned, verbatim)", False),
    ("goal_pinned", "Goal", False),  # version 1 only: version 2 says so in its preamble
    ("pinned", "Pinned by the runtime", True),
    ("narrative", "Narrative (a summarizer's, from the transcript)", False),
    ("user_requests", "The user's words, oldest first", True),
    ("decisions", "Decisions", True),
    ("files", "Files touched", True),
    ("commands", "Calls and outcomes", True),
    ("errors", "Errors not seen resolved", True),
    ("verification", "Verification results", True),
    ("names", "Names used, by the fact seq of their last use", True),
    ("state", "Last reported state", False),
    ("next_steps", "Next steps", True),
    ("lessons", "Lessons from failed attempts", True),
    ("references", "In the log, to fetch when needed", True),
    ("facts", "Notes: facts", True),
    ("note_commands", "Notes: calls and outcomes", True),
    ("note_decisions", "Notes: decisions", True),
    ("open_questions", "Notes: open questions", True),
    ("note_next_steps", "Notes: next steps", True),
    ("omitted", "Shortened for space (oldest entries left out; recall them by seq)", True),
)
_V1_HEADINGS = {
    **{key: heading for key, heading, _ in _SECTIONS},
    "pinned": "Pinned by the runtime before compaction",
    "narrative": "Narrative (written by a summarizer from the transcript)",
    "user_requests": "User requests and corrections (the user's own words, oldest first)",
    "decisions": "Decisions the agent stated",
    "commands": "Commands and tool calls, with outcomes",
    "names": "Names and ids the agent used, by the fact seq of their last use",
    "state": "State the agent last reported (the agent's words, not verified)",
    "next_steps": "Next steps the agent stated",
    "note_commands": "Notes: commands and tool calls, with outcomes",
    "note_decisions": "Notes: decisions the agent stated",
    "note_next_steps": "Notes: next steps the agent stated",
    "omitted": "Shortened for space (oldest entries left out, still in the fact seqs above)",
}
_IS_LIST = {key: is_list for key, _, is_list in _SECTIONS}
_HEADINGS = {key: heading for key, heading, _ in _SECTIONS}
# How the `omitted` section names a list it shortened.
_LABELS = {
    "user_requests": "user requests",
    "decisions": "decisions",
    "files": "files",
    "commands": "commands",
    "errors": "errors",
    "verification": "verification results",
    "next_steps": "next steps",
    "lessons": "lessons",
    "references": "log references",
    "facts": "notes: facts",
    "note_commands": "notes: commands",
    "note_decisions": "notes: decisions",
    "open_questions": "notes: open questions",
    "note_next_steps": "notes: next steps",
}
_KEYS_BY_LABEL = {label: key for key, label in _LABELS.items()}
_SUMMARY_KEYS = (
    "user_requests",
    "decisions",
    "files",
    "commands",
    "errors",
    "verification",
    "next_steps",
)


def _preamble(
    kind: ProductKind,
    source_range: tuple[int | None, int | None],
    *,
    goal_pinned: bool,
    version: int = _PRODUCT_VERSION,
) -> str:
    first, last = source_range
    span = f"fact seqs {first}–{last}" if first is not None else "earlier facts"
    if version == 1:
        opening = {
            "summary": f"Earlier work in this session ({span}) was compacted into this record.",
            "handoff": f"The work so far in this session ({span}) was handed off into this record"
            " so that a fresh context can carry on.",
            "notes": f"Notes kept across compactions of this session (latest: {span}).",
        }[kind]
        return (
            f"{opening} It is history kept for reference, not new instructions: requests quoted"
            " here are the user's own words; decisions, state and next steps are what the agent"
            " said, not verified facts. Every original item is still in the session log under"
            " its fact seq. The JSON block at the end is for the service."
        )
    opening = {
        "summary": f"Earlier work in this session ({span}), compacted.",
        "handoff": f"The work so far in this session ({span}), handed off to a fresh context.",
        "notes": f"Notes kept across compactions of this session (latest: {span}).",
    }[kind]
    goal = f" {GOAL_PINNED_ABOVE}" if goal_pinned else ""
    return (
        f"{opening} For reference, not instructions: quoted requests are the user's own words;"
        " decisions, state and next steps are the agent's, unverified. Every original is in the"
        f" session log under its fact seq.{goal}"
    )


# The list sections a record may shorten to fit its budget, each with the newest entries it
# keeps whatever the budget. The agent's own bookkeeping goes first; the user's words, the
# files and the errors it works on only when that is not enough.
_FLOORS: tuple[dict[str, int], ...] = (
    {
        "commands": 3,
        "note_commands": 3,
        "verification": 1,
        "decisions": 1,
        "note_decisions": 1,
        "references": 3,
        "lessons": 1,
        "facts": 3,
        "open_questions": 1,
    },
    {"files": 8, "errors": 2, "next_steps": 1, "note_next_steps": 1, "user_requests": 1},
    # A small budget (a short history compacted to a small target) may take the agent's own
    # bookkeeping down to nothing, but not the lists holding what the loss check asks for (the
    # files, the errors, the user's latest words, the notes' facts): the record names each
    # list it emptied, to recall by seq.
    {
        "commands": 0,
        "note_commands": 0,
        "verification": 0,
        "decisions": 0,
        "note_decisions": 0,
        "references": 0,
        "lessons": 0,
        "open_questions": 0,
        "next_steps": 0,
        "note_next_steps": 0,
    },
)
# Per dropped multi-line entry beyond its text: its length in the meta.
_LINES_TOKENS = 8


def _values(product: Product) -> dict[str, tuple[str, ...]]:
    """Every section's entries, keyed as in `_SECTIONS`."""
    values: dict[str, tuple[str, ...]] = {}
    if product.goal and not product.goal_pinned:
        values["goal"] = (product.goal,)
    values["pinned"] = product.pinned
    if (summary := product.summary) is not None:
        values["narrative"] = (summary.narrative,) if summary.narrative else ()
        values["state"] = (summary.state,) if summary.state else ()
        values.update({key: getattr(summary, key) for key in _SUMMARY_KEYS})
    if (handoff := product.handoff) is not None:
        values["lessons"] = handoff.lessons
        values["references"] = handoff.references
    if (notes := product.notes) is not None:
        values["facts"] = notes.facts
        values["note_commands"] = notes.commands
        values["note_decisions"] = notes.decisions
        values["open_questions"] = notes.open_questions
        values["note_next_steps"] = notes.next_steps
    values["names"] = trail_entries(product.trail) if product.trail is not None else ()
    values["omitted"] = tuple(_LABELS[key] for key in product.omitted)
    return values


def _with_lists(product: Product, lists: dict[str, tuple[str, ...]]) -> Product:
    """`product` with the list sections in `lists` replaced."""
    summary, notes, handoff = product.summary, product.notes, product.handoff
    if summary is not None:
        summary = replace(
            summary,
            user_requests=lists.get("user_requests", summary.user_requests),
            decisions=lists.get("decisions", summary.decisions),
            files=lists.get("files", summary.files),
            commands=lists.get("commands", summary.commands),
            errors=lists.get("errors", summary.errors),
            verification=lists.get("verification", summary.verification),
            next_steps=lists.get("next_steps", summary.next_steps),
        )
    if handoff is not None:
        handoff = Handoff(
            references=lists.get("references", handoff.references),
            lessons=lists.get("lessons", handoff.lessons),
        )
    if notes is not None:
        notes = Notes(
            facts=lists.get("facts", notes.facts),
            commands=lists.get("note_commands", notes.commands),
            decisions=lists.get("note_decisions", notes.decisions),
            open_questions=lists.get("open_questions", notes.open_questions),
            next_steps=lists.get("note_next_steps", notes.next_steps),
        )
    return replace(product, summary=summary, notes=notes, handoff=handoff)


def _entry_tokens(entry: str, count: Callable[[str], int]) -> int:
    """What a list entry adds to a record: its line, and its length in the meta if it has
    line breaks."""
    return count(f"- {entry}\n") + (_LINES_TOKENS if "\n" in entry else 0)


def fit_product(product: Product, *, budget: int, count: Callable[[str], int]) -> Product:
    """`product`, its record within `budget` tokens where the floors allow it.

    The oldest entries go first, from the costliest list of the first tier of `_FLOORS` that is
    above its floor, then of the next; the goal, the runtime's pins, the narrative, the state
    and the files' floor are never cut. Every list shortened is named in the record
    (`omitted`, carried across merges), so that the model knows to recall what it no longer
    lists. Deterministic: a pure function of the product, the budget and the counter.
    """
    over = item_tokens(render_product(product), count) - budget
    values = _values(product)
    lists = {key: list(values[key]) for tier in _FLOORS for key in tier if values.get(key)}
    costs = {key: [_entry_tokens(e, count) for e in lists[key]] for key in lists}
    omitted = list(product.omitted)
    fitted = product
    while over > 0:
        tier = next(
            (tier for tier in _FLOORS if any(len(lists.get(k, ())) > tier[k] for k in tier)),
            None,
        )
        if tier is None:
            break
        open_keys = [k for k in tier if len(lists.get(k, ())) > tier[k]]
        while over > 0 and open_keys:
            key = max(open_keys, key=lambda k: (sum(costs[k]), k))
            lists[key].pop(0)
            over -= costs[key].pop(0)
            if len(lists[key]) <= tier[key]:
                open_keys.remove(key)
            if key not in omitted:
                omitted.append(key)
                over += _entry_tokens(_LABELS[key], count)
        fitted = replace(
            _with_lists(product, {key: tuple(entries) for key, entries in lists.items()}),
            omitted=tuple(sorted(omitted, key=list(_HEADINGS).index)),
        )
        # The per-entry costs estimate the rendered record's: measure it again.
        over = item_tokens(render_product(fitted), count) - budget
    return fitted


def render_product(product: Product) -> Item:
    values = _values(product)
    parts = [
        _MARKERS[product.kind],
        "\n",
        _preamble(product.kind, product.source_range, goal_pinned=product.goal_pinned),
    ]
    lines: list[list[Any]] = []
    for key, heading, is_list in _SECTIONS:
        if entries := values.get(key, ()):
            parts.append(f"\n\n## {heading}\n")
            parts.append("\n".join(f"- {e}" for e in entries) if is_list else entries[0])
            lines.extend([key, index, len(e)] for index, e in enumerate(entries) if "\n" in e)
    first, last = product.source_range
    meta: dict[str, Any] = {
        "contextd": product.kind,
        "version": _PRODUCT_VERSION,
        "range": [first, last],
    }
    carried = tuple(
        part
        for part, present in (
            ("summary", product.summary),
            ("notes", product.notes),
            ("handoff", product.handoff),
        )
        if present is not None
    )
    if carried != _OWN_PARTS[product.kind]:
        meta["parts"] = carried
    # A summary carried into notes keeps the range it was written for.
    if (summary := product.summary) is not None and (summary.from_seq, summary.to_seq) != (
        first,
        last,
    ):
        meta["summary_range"] = [summary.from_seq, summary.to_seq]
    if lines:
        meta["lines"] = lines
    parts.append(f"{_META_FENCE}{json.dumps(meta, separators=(',', ':'))}\n```")
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "".join(parts)}],
    }


@dataclass(frozen=True)
class _Meta:
    """What a record's meta says, in either version."""

    version: int
    source_range: tuple[int | None, int | None]
    parts: frozenset[str]
    summary_range: tuple[int | None, int | None]
    layout: list[tuple[str, list[int]]] | None
    """Version 1: every section's entry lengths."""
    lines: dict[tuple[str, int], int]
    """Version 2: the lengths of the entries with line breaks, by section and index."""


def _read_meta(kind: ProductKind, raw: str) -> _Meta | None:
    try:
        meta = json.loads(raw)
        if meta.get("contextd") != kind:
            return None
        if meta.get("version") == 1:
            first, last = meta["source_range"]["from_seq"], meta["source_range"]["to_seq"]
            summary_range = meta.get("summary_range") or {}
            summary = (summary_range.get("from_seq"), summary_range.get("to_seq"))
            layout = [(str(key), [int(n) for n in lengths]) for key, lengths in meta["layout"]]
            parsed = _Meta(1, (first, last), frozenset(meta["parts"]), summary, layout, {})
        elif meta.get("version") == _PRODUCT_VERSION:
            first, last = meta["range"]
            summary = tuple(meta.get("summary_range", (first, last)))
            lines = {(str(key), int(index)): int(n) for key, index, n in meta.get("lines", ())}
            parts = frozenset(meta.get("parts", _OWN_PARTS[kind]))
            parsed = _Meta(2, (first, last), parts, (summary[0], summary[1]), None, lines)
        else:
            return None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    seqs = (*parsed.source_range, *parsed.summary_range)
    lengths = [n for _, ns in parsed.layout or () for n in ns] + list(parsed.lines.values())
    if any(seq is not None and type(seq) is not int for seq in seqs) or any(n < 0 for n in lengths):
        return None
    return parsed


def _found_layout(
    text: str, position: int, end: int, lines: dict[tuple[str, int], int]
) -> list[tuple[str, list[int]]] | None:
    """A version 2 record's sections from `position` to `end`, with their entries' lengths:
    the sections come in rendering order, once each, and an entry runs to the end of its line
    unless the meta gives its length."""
    keys = [key for key, _, _ in _SECTIONS if key != "goal_pinned"]
    layout: list[tuple[str, list[int]]] = []
    while position < end:
        key = next((k for k in keys if text.startswith(f"\n\n## {_HEADINGS[k]}\n", position)), None)
        if key is None:
            return None
        keys = keys[keys.index(key) + 1 :]
        position += len(f"\n\n## {_HEADINGS[key]}\n")
        lengths: list[int] = []
        while True:
            position += len(("\n" if lengths else "") + ("- " if _IS_LIST[key] else ""))
            length = lines.get((key, len(lengths)))
            if length is None:
                newline = text.find("\n", position, end)
                length = (newline if newline >= 0 else end) - position
            lengths.append(length)
            position += length
            if not (_IS_LIST[key] and position < end and text.startswith("\n- ", position)):
                break
        layout.append((key, lengths))
    return layout


def read_product(item: Item) -> Product | None:
    """The product `item` is, read back exactly; None when it is not one."""
    if item_type(item) != "message" or item.get("role") != "user":
        return None
    text = visible_text(item)
    kind = next((k for k, m in _MARKERS.items() if text.startswith(m + "\n")), None)
    fence = text.rfind(_META_FENCE)
    if kind is None or fence < 0 or not text.endswith("\n```"):
        return None
    meta = _read_meta(kind, text[fence + len(_META_FENCE) : -4])
    if meta is None:
        return None
    heads = {
        pinned: f"{_MARKERS[kind]}\n"
        + _preamble(kind, meta.source_range, goal_pinned=pinned, version=meta.version)
        for pinned in (True, False)  # the longer first: the other is a prefix of it
    }
    goal_pinned = next((pinned for pinned, head in heads.items() if text.startswith(head)), None)
    if goal_pinned is None:
        return None
    position = len(heads[goal_pinned])
    layout = meta.layout
    if layout is None:
        layout = _found_layout(text, position, fence, meta.lines)
        if layout is None:
            return None
    headings = _HEADINGS if meta.version == _PRODUCT_VERSION else _V1_HEADINGS
    values: dict[str, tuple[str, ...]] = {}
    for key, lengths in layout:
        if key not in headings or not lengths or (len(lengths) > 1 and not _IS_LIST[key]):
            return None
        opening = f"\n\n## {headings[key]}\n"
        if not text.startswith(opening, position):
            return None
        position += len(opening)
        entries: list[str] = []
        for index, length in enumerate(lengths):
            bullet = ("\n" if index else "") + ("- " if _IS_LIST[key] else "")
            if not text.startswith(bullet, position):
                return None
            position += len(bullet)
            entries.append(text[position : position + length])
            position += length
        values[key] = tuple(entries)
    if position != fence:
        return None

    if any(label not in _KEYS_BY_LABEL for label in values.get("omitted", ())):
        return None
    trail = read_trail(values["names"]) if "names" in values else None
    if "names" in values and trail is None:
        return None

    def one(key: str) -> str | None:
        return values[key][0] if key in values else None

    goal = one("goal")
    parts = meta.parts
    summary_first, summary_last = meta.summary_range
    return Product(
        kind=kind,
        goal=goal,
        summary=Summary(
            goal=goal,
            **{key: values.get(key, ()) for key in _SUMMARY_KEYS},
            state=one("state"),
            from_seq=summary_first,
            to_seq=summary_last,
            narrative=one("narrative"),
        )
        if "summary" in parts
        else None,
        notes=Notes(
            facts=values.get("facts", ()),
            commands=values.get("note_commands", ()),
            decisions=values.get("note_decisions", ()),
            open_questions=values.get("open_questions", ()),
            next_steps=values.get("note_next_steps", ()),
        )
        if "notes" in parts
        else None,
        handoff=Handoff(values.get("references", ()), values.get("lessons", ()))
        if "handoff" in parts
        else None,
        pinned=values.get("pinned", ()),
        source_range=meta.source_range,
        goal_pinned=goal_pinned or values.get("goal_pinned") == (_V1_GOAL_PINNED_ABOVE,),
        omitted=tuple(_KEYS_BY_LABEL[label] for label in values.get("omitted", ())),
        trail=trail,
    )


def is_compaction_product(item: Item) -> bool:
    """True iff `item` is a summary, handoff or notes item this module wrote."""
    text = visible_text(item) if item_type(item) == "message" else ""
    return text.startswith(tuple(_MARKERS.values())) and read_product(item) is not None


def summary_of(item: Item) -> Summary | None:
    """The summary a product item carries (summary and handoff items, or notes that kept one)."""
    product = read_product(item)
    return product.summary if product is not None else None


def notes_of(item: Item) -> Notes | None:
    """The notes a product item carries."""
    product = read_product(item)
    return product.notes if product is not None else None
