"""The stored plan's codec: what a plan keeps of its answer, and the answer derived again from
it (pure: what it reads of the log and the request is handed to it).

A plan stores what cannot be derived (invariants):

- items and plan entries are stored packed (`app.domain.packing`, lossless): their keys and
  most of their values repeat from record to record;
- the rendering (`messages`, `system`, `conversion`) is a pure function of the answer's items,
  its output format and where its cache breakpoints went, so it is not stored;
- an item that is a candidate of the request, as the request gave it, is stored by reference:
  the plan stores the request, and the item's source and id name the candidate in it;
- the request's larger candidate bodies are stored once per session, by digest
  (`app.domain.addressing`, `app.storage.bodies`), and read back into it
  (`app.usecases.plan_record.request_of`);
- in session mode, a history item shown as it is (form `raw`) is stored by reference: its id
  `history:<n>` names the n-th item of the session's history as of the plan's `as_of_seq`,
  normalized as the plan says (`HISTORY_FROM`), state fragments left out. The log is
  append-only and normalization a pure function of it, so the item reads back as it was sent;
- the plan entries of the history items shown, which close the plan, say only what those
  items say (id, form, tokens, position): the plan stores how many there are
  (`SHOWN_HISTORY`) and derives them from the items; tools that are the recall tool are
  stored as its name (`RECALL_TOOL`) and derived from the output format;
- reading back checks the derived items against the plan's `plan_hash`, and a plan the log no
  longer yields is a 409 `stored_plan_mismatch` naming the positions whose items differ from
  the fingerprints it stored, never a silent change.

Plans stored whole (before these rules) read back as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.domain.assemble import HISTORY_SOURCE
from app.domain.assemble.rendering import render_context
from app.domain.formats import cap_cache_breakpoints, mark_cache_breakpoint
from app.domain.items import Format, Item
from app.domain.packing import pack_records, unpack_records
from app.domain.recall import recall_tool

__all__ = ["HISTORY_FROM", "Offered", "ShownHistory", "answer_of", "offered", "stored_answer"]


RENDERED = ("messages", "system", "conversion")
"""The fields of an answer that render its `items` in the output format: a pure function of the
items, the format and the breakpoints' positions, so a plan is stored without them."""
OUTPUT_FORMAT = "output_format"
"""The key under which a stored plan keeps the format its items are rendered in."""
HISTORY_FROM = "history_from"
"""The key under which a session-mode plan keeps how its history was normalized (encoding and
input modalities): with the log up to `as_of_seq`, what its history items are derived from."""
PACKED = "packed"
"""The key under which a plan lists the fields it stores packed (`app.domain.packing`): its
items and plan entries, whose keys and most values repeat from record to record."""
PACKABLE = ("items", "plan")
SHOWN_HISTORY = "shown_history"
"""The key under which a plan says its last plan entries, that many, are those of the history
items it shows, derived from the items when read (the plan stores them without)."""
RECALL_TOOL = "recall"
"""What a plan stores for `tools` when they are the recall tool in its output format."""

ShownHistory = Callable[[Mapping[str, Any]], Sequence[Item]]
"""The normalized history a plan's `history:<n>` items index (state fragments left out), as of
the plan, normalized as `HISTORY_FROM` says."""


Offered = Mapping[tuple[str, str], Mapping[str, Any]]
"""The candidates a request offered, by (source, id): what a plan's items of those candidates
are derived from."""


def offered(request: Mapping[str, Any]) -> Offered:
    """The candidates of a request (its JSON), by (source, id)."""
    return {
        (str(source["source"]), str(spec["id"])): spec
        for source in request.get("sources") or ()
        for spec in source["items"]
    }


def stored_answer(
    answer: Mapping[str, Any],
    *,
    output_format: Format,
    history_from: dict[str, Any] | None,
    candidates: Offered,
) -> dict[str, Any]:
    """What a plan stores of its answer, its items and plan entries packed (`PACKED`): all of it
    but what `answer_of` derives again, namely the rendering (`RENDERED`); the body of every
    item that is a candidate of the request as the request gave it (the plan stores the
    request: the item's source and id name it); in session mode the body of every history
    item shown as it is (the log holds it: the item's `id` names its place in the history as
    of the plan); the plan entries of the history items shown, which close the plan and say
    what the items say (`SHOWN_HISTORY`); and the tools, when they are the recall tool, which
    the output format names (`RECALL_TOOL`)."""
    kept: dict[str, Any] = {key: value for key, value in answer.items() if key not in RENDERED}
    kept["items"] = [_by_reference(item, candidates=candidates) for item in answer["items"]]
    shown = _shown_history_entries(answer)
    if shown:
        kept["plan"] = list(answer["plan"][:-shown])
        kept[SHOWN_HISTORY] = shown
    if answer["tools"] and answer["tools"] == [recall_tool(output_format)]:
        kept["tools"] = RECALL_TOOL
    for field in PACKABLE:
        kept[field] = pack_records(kept[field])
    if history_from is not None:
        kept[HISTORY_FROM] = history_from
    return {**kept, OUTPUT_FORMAT: output_format, PACKED: list(PACKABLE)}


def _shown_history_entry(item: Mapping[str, Any]) -> dict[str, Any]:
    """The plan entry of a history item the answer shows: what the item says of itself."""
    return {
        "id": item["id"],
        "source": HISTORY_SOURCE,
        "layer": "recent",
        "source_class": HISTORY_SOURCE,
        "decision": "selected",
        "reason": None,
        "form": item["form"],
        "tokens": item["tokens"],
        "score": None,
        "position": item["position"],
    }


def _shown_history_entries(answer: Mapping[str, Any]) -> int:
    """How many entries at the end of the answer's plan are those of the history items it
    shows, in order, each exactly `_shown_history_entry` of its item; 0 unless all are."""
    shown = [item for item in answer["items"] if item["source"] == HISTORY_SOURCE]
    plan = answer["plan"]
    if not shown or len(plan) < len(shown):
        return 0
    tail = plan[len(plan) - len(shown) :]
    if any(
        entry != _shown_history_entry(item) or list(entry) != list(_shown_history_entry(item))
        for entry, item in zip(tail, shown, strict=True)
    ):
        return 0
    return len(shown)


def _by_reference(item: dict[str, Any], *, candidates: Offered) -> dict[str, Any]:
    if item["form"] != "raw":
        return item
    if item["source"] == HISTORY_SOURCE:
        return {key: value for key, value in item.items() if key != "item"}
    spec = candidates.get((item["source"], item["id"]))
    if spec is None or (spec.get("content"), spec.get("item")) != (item["content"], item["item"]):
        return item
    return {key: value for key, value in item.items() if key not in ("content", "item")}


def answer_of(
    stored: dict[str, Any], *, history: ShownHistory, candidates: Callable[[], Offered]
) -> dict[str, Any]:
    """A stored plan's answer as it was sent: items the plan stored by reference filled in from
    the request's `candidates` (read only if some item needs them) or the `history`, the
    rendering derived from the items in the
    stored format, with the cache breakpoints marked where the plan put them. A plan stored
    whole (before plans were stored without their rendering) is returned as it is."""
    if OUTPUT_FORMAT not in stored:
        return stored
    answer = {
        key: value
        for key, value in stored.items()
        if key not in (OUTPUT_FORMAT, HISTORY_FROM, PACKED)
    }
    for field in stored.get(PACKED, ()):
        answer[field] = unpack_records(answer[field])
    if answer.pop(SHOWN_HISTORY, 0):
        answer["plan"] += [
            _shown_history_entry(item)
            for item in answer["items"]
            if item["source"] == HISTORY_SOURCE
        ]
    if answer.get("tools") == RECALL_TOOL:
        answer["tools"] = [recall_tool(stored[OUTPUT_FORMAT])]
    if any("item" not in item for item in answer["items"]):
        shown = (
            history(stored[HISTORY_FROM])
            if any("content" in item and "item" not in item for item in answer["items"])
            else ()
        )
        offered_ = candidates() if any("content" not in item for item in answer["items"]) else {}
        answer["items"] = [
            _filled(item, shown=shown, candidates=offered_) for item in answer["items"]
        ]
    rendered = render_context(
        ((item["item"], item["content"]) for item in answer["items"]), stored[OUTPUT_FORMAT]
    )
    if stored[OUTPUT_FORMAT] == "anthropic":
        marked: set[tuple[int | None, int | None]] = set()
        for breakpoint in answer["cache_breakpoints"]:
            rendered, block = mark_cache_breakpoint(rendered, breakpoint["position"])
            if block is not None:
                marked.add((block.message, block.block))
        rendered = cap_cache_breakpoints(rendered, keep=marked)
    # In the order the answer was sent, so that it reads back byte for byte.
    ordered: dict[str, Any] = {}
    for key, value in answer.items():
        if key == "cache_breakpoints":
            ordered["messages"], ordered["system"] = rendered.items, rendered.system
        elif key == "tools":
            ordered["conversion"] = rendered.report()
        ordered[key] = value
    return ordered


def _filled(item: dict[str, Any], *, shown: Sequence[Item], candidates: Offered) -> dict[str, Any]:
    """`item` with the body it was stored without. What is no longer there (a place the
    history does not have) yields none, which the plan's hash then reports."""
    if "item" in item:
        return item
    if "content" in item:  # a history item, by its place in the history
        place = int(item["id"].removeprefix(f"{HISTORY_SOURCE}:"))
        return {**item, "item": shown[place] if place < len(shown) else None}
    spec = candidates.get((item["source"], item["id"]), {})
    return {**item, "content": spec.get("content"), "item": spec.get("item")}
