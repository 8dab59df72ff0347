"""The fact kinds: the type each of the service's own facts is logged under, how every kind is
written, and what recall reads back of one.

Invariants:

- Clients never write `contextd.*` facts (`client_batch` refuses them, and types the log
  cannot store); every builder of a `contextd.*` fact marks it harness-authored.
- A fact's `tokens` is `count(visible_text(item))` in the session's encoding for model-visible
  items, the compacted history's tokens for a compaction, and 0 for bookkeeping.
- A message sent in Chat or Anthropic form is stored once, whole, with the first of the items
  it became; the others only name their place in it (see `client_batch`).
- Each record here is read back by the fold (`app.domain.facts.fold`) field for field: a field
  renamed here is a field the fold no longer finds in facts already logged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain.compaction import CompactionResult
from app.domain.errors import RuleBroken
from app.domain.formats import to_responses
from app.domain.history import HistoryEntry
from app.domain.items import (
    INTERNAL_TYPE_PREFIX,
    MAX_TYPE_LENGTH,
    CountTokens,
    Format,
    Item,
    item_tokens,
    item_type,
    visible_text,
)
from app.domain.world_state import WorldStateUpdate, diff_world_state

RETRACTION_FACT = f"{INTERNAL_TYPE_PREFIX}retraction"
RESET_FACT = f"{INTERNAL_TYPE_PREFIX}reset"
GOAL_FACT = f"{INTERNAL_TYPE_PREFIX}goal"
WORLD_STATE_FACT = f"{INTERNAL_TYPE_PREFIX}world_state"
COMPACTION_FACT = f"{INTERNAL_TYPE_PREFIX}compaction"
CHILD_FACT = f"{INTERNAL_TYPE_PREFIX}child"

ChildKind = Literal["delegate", "fork"]

HARNESS: Mapping[str, Any] = {"harness_authored": True}


@dataclass(frozen=True)
class NewFact:
    """One fact to append: its type, the item as stored, its tokens and its provenance."""

    type: str
    item: dict[str, Any]
    tokens: int
    provenance: dict[str, Any]
    original: dict[str, Any] | None = None
    """For an item sent in another format: see `client_batch`."""


# Writing.


def client_batch(
    items: list[dict[str, Any]], fmt: Format, *, field: str
) -> tuple[list[Item], list[dict[str, Any] | None]]:
    """Client items in Responses form, each with what the log keeps of its original form.

    A message of Chat or Anthropic may become several items. The first keeps the message
    exactly as sent, `{"format", "message", "parts"}` (`parts`: how many items it became); the
    others name their place in it, `{"format", "part"}`, so each message is stored once. Items
    sent in Responses form are their own original (None). `contextd.*` types are the service's
    own and refused.
    """
    parsed = to_responses(items, fmt)
    unstorable = [
        source
        for item, source in zip(parsed.items, parsed.sources, strict=True)
        if len(kind := item_type(item)) > MAX_TYPE_LENGTH or "\x00" in kind
    ]
    if unstorable:
        raise RuleBroken(
            "unstorable_value",
            f"an item type is at most {MAX_TYPE_LENGTH} characters, without a NUL character",
            details=[
                {"loc": ["body", field, i, "type"], "msg": "type cannot be stored"}
                for i in sorted(set(unstorable))
            ],
        )
    reserved = [
        i for i, item in enumerate(parsed.items) if item_type(item).startswith(INTERNAL_TYPE_PREFIX)
    ]
    if reserved:
        raise RuleBroken(
            "reserved_item_type",
            f"item types starting with {INTERNAL_TYPE_PREFIX!r} are written by the service only",
            details=[{"loc": ["body", field, i, "type"], "msg": "reserved type"} for i in reserved],
        )
    if fmt == "responses":
        return parsed.items, [None] * len(parsed.items)
    parts = Counter(parsed.sources)
    first: dict[int, int] = {}
    originals: list[dict[str, Any] | None] = []
    for position, source in enumerate(parsed.sources):
        part = position - first.setdefault(source, position)
        if part == 0:
            originals.append({"format": fmt, "message": items[source], "parts": parts[source]})
        else:
            originals.append({"format": fmt, "part": part})
    return parsed.items, originals


def client_items(items: list[dict[str, Any]], fmt: Format, *, field: str) -> list[Item]:
    """Client items in Responses form (see `client_batch`)."""
    return client_batch(items, fmt, field=field)[0]


def reset_fact() -> NewFact:
    """After it, the active history starts empty; the log keeps everything, and the goal and
    world state stay the session's."""
    return NewFact(RESET_FACT, {"type": RESET_FACT}, 0, dict(HARNESS))


def conclusion_item(conclusion: dict[str, Any], fmt: Format) -> Item:
    """A child's conclusion as the one Responses item it must be."""
    items = client_items([conclusion], fmt, field="conclusion")
    if len(items) != 1:
        raise RuleBroken(
            "conclusion_not_one_item",
            "a conclusion is exactly one item",
            details=[{"loc": ["body", "conclusion"], "msg": "converts to several items"}],
        )
    return items[0]


def item_fact(
    item: Item,
    *,
    provenance: Mapping[str, Any],
    count_tokens: CountTokens,
    original: dict[str, Any] | None = None,
) -> NewFact:
    """A model-visible item as a fact, counted in the session's encoding."""
    tokens = item_tokens(item, count_tokens)
    return NewFact(item_type(item), item, tokens, dict(provenance), original)


def goal_fact(text: str, *, version: int, count_tokens: CountTokens, source: str | None) -> NewFact:
    """Goal version `version`; `source` names the writer in the provenance (None: the client's
    `PUT /goal`)."""
    origin = {**HARNESS, "source": source} if source else dict(HARNESS)
    record = {"type": GOAL_FACT, "version": version, "text": text}
    return NewFact(GOAL_FACT, record, count_tokens(text), origin)


def world_state_facts(
    update: WorldStateUpdate,
    *,
    sections: Mapping[str, Any],
    version: int,
    count_tokens: CountTokens,
    source: str = "world_state",
) -> list[NewFact]:
    """Snapshot `version` (as a merge patch when there is a previous one), then the update
    fragments as harness-authored developer messages, so that the fold can later tell whether
    the model still sees them. `source` names the writer in the provenance."""
    origin = {**HARNESS, "source": source}
    record = (
        {"type": WORLD_STATE_FACT, "version": version, "patch": update.patch}
        if update.patch is not None
        else {"type": WORLD_STATE_FACT, "version": version, "snapshot": dict(sections)}
    )
    return [
        NewFact(WORLD_STATE_FACT, record, 0, origin),
        *(item_fact(item, provenance=origin, count_tokens=count_tokens) for item in update.updates),
    ]


def delegate_brief(
    *,
    goal: str | None,
    sections: Mapping[str, Any],
    brief: Sequence[Item],
    count_tokens: CountTokens,
) -> list[NewFact]:
    """A delegate's first facts: its goal, the inherited sections as world-state version 1
    (sent whole, as to a model that has seen none) and the brief's items."""
    facts = (
        []
        if goal is None
        else [goal_fact(goal, version=1, count_tokens=count_tokens, source="delegate")]
    )
    if sections:
        first = diff_world_state(None, sections, baseline=None, active_history=(), version=1)
        facts += world_state_facts(
            first, sections=sections, version=1, count_tokens=count_tokens, source="delegate"
        )
    facts.extend(
        item_fact(item, provenance={"source": "brief"}, count_tokens=count_tokens) for item in brief
    )
    return facts


def child_link_fact(
    *,
    child_session_id: str,
    kind: ChildKind,
    inherit: Mapping[str, bool],
    unit: str | None,
    fork_seq: int | None,
) -> NewFact:
    """The link a parent's log keeps to each of its children."""
    link = {
        "type": CHILD_FACT,
        "child_session_id": child_session_id,
        "kind": kind,
        "inherit": dict(inherit),
        "unit": unit,
        "fork_seq": fork_seq,
    }
    return NewFact(CHILD_FACT, link, 0, dict(HARNESS))


def conclusion_fact(
    item: Item, *, from_session: str, via: str, count_tokens: CountTokens
) -> NewFact:
    """A child's one conclusion, appended to its parent with a back-reference to the child."""
    back_reference = {"from_session": from_session, "via": via, **HARNESS}
    return item_fact(item, provenance=back_reference, count_tokens=count_tokens)


def _stored_entry(entry: HistoryEntry) -> dict[str, Any]:
    return {"seq": entry.seq} if entry.verbatim and entry.seq is not None else {"item": entry.item}


def compaction_fact(
    result: CompactionResult, *, compaction_id: str, requested_strategy: str
) -> NewFact:
    """The compaction record: the new projection (kept facts by seq, written items whole) and
    what the compaction did."""
    record = {
        "type": COMPACTION_FACT,
        "compaction_id": compaction_id,
        "strategy": result.strategy,
        "requested_strategy": requested_strategy,
        "covered": list(result.covered) if result.covered else None,
        "history": [_stored_entry(entry) for entry in result.history],
        "summary": result.summary.as_dict() if result.summary else None,
        "notes": result.notes.as_dict() if result.notes else None,
        "working_set": [list(pair) for pair in result.working_set],
        "loss_missing": list(result.loss_missing),
        "fell_back": result.fell_back,
    }
    return NewFact(COMPACTION_FACT, record, result.tokens_after, dict(HARNESS))


# Reading: what recall shows of one fact.


def fact_text(kind: str, item: dict[str, Any]) -> str:
    """What recall reads back of a fact: a client item's model-visible text exactly as
    appended, a goal version's text, and nothing for the service's bookkeeping."""
    if kind == GOAL_FACT:
        return str(item.get("text", ""))
    if kind.startswith(INTERNAL_TYPE_PREFIX):
        return ""
    return visible_text(item)
