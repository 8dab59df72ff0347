"""What a stored plan keeps of its answer, and the answer derived again from it.

A plan stores what cannot be derived (invariants):

- items and plan entries are stored packed (`app.domain.packing`, lossless): their keys and
  most of their values repeat from record to record;
- the rendering (`messages`, `system`, `conversion`) is a pure function of the answer's items,
  its output format and where its cache breakpoints went, so it is not stored;
- an item that is a candidate of the request, as the request gave it, is stored by reference:
  the plan stores the request, and the item's source and id name the candidate in it;
- the request's larger candidate bodies are stored once per session, by digest
  (`app.domain.addressing`, `app.storage.bodies`), and read back into it (`request_of`);
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

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.contract.assembly import AssembleAnswer, AssembleRequest
from app.domain.addressing import (
    address_bodies,
    addressed_digests,
    restore_bodies,
)
from app.domain.assemble import HISTORY_SOURCE
from app.domain.assemble.model import fingerprint_of, stored_plan_hash
from app.domain.assemble.rendering import render_context
from app.domain.errors import StoredPlanMismatch
from app.domain.formats import cap_cache_breakpoints, mark_cache_breakpoint
from app.domain.history import EntryItems, HistoryEntry
from app.domain.items import Format, Item
from app.domain.json_encoding import decode_json, encode_json
from app.domain.packing import pack_records, unpack_records
from app.domain.recall import recall_tool
from app.domain.world_state import is_state_fragment
from app.storage import bodies, session_rows
from app.storage.caches import caches_of
from app.storage.plans import StoredAssembly
from app.storage.session_rows import SessionSnapshot
from app.storage.tables import SessionRow
from app.usecases.loaded_history import load_history

__all__ = [
    "ReceivedRequest",
    "answer_of",
    "answer_of_row",
    "offered",
    "remember_shown_history",
    "request_of",
    "shown_history",
    "stored_answer",
    "stored_request",
]


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
    answer: AssembleAnswer,
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


def _shown_history_entries(answer: AssembleAnswer) -> int:
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


def shown_history(
    db: Session, *, session: SessionRow | SessionSnapshot, as_of_seq: int
) -> ShownHistory:
    """The history a plan of `session` as of `as_of_seq` showed (see `ShownHistory`): the one
    its assembly left in this process (the app's caches, `app.storage.caches`), else normalized
    again from the log. Never stale: the log is append-only and normalization a pure function of
    it up to the seq."""

    def derive(history_from: Mapping[str, Any]) -> Sequence[Item]:
        encoding = str(history_from["encoding"])
        modalities = frozenset(history_from["input_modalities"])
        key = _shown_key(db, session, as_of_seq=as_of_seq, encoding=encoding, modalities=modalities)
        caches = caches_of(db)
        with caches.shown_lock:
            kept = caches.shown.get(key)
        if kept is not None:
            return kept
        loaded = load_history(
            db, session, up_to_seq=as_of_seq, encoding=encoding, input_modalities=modalities
        )
        return [item for item in loaded.items if not is_state_fragment(item)]

    return derive


def _shown_key(
    db: Session,
    session: SessionRow | SessionSnapshot,
    *,
    as_of_seq: int,
    encoding: str,
    modalities: frozenset[str],
) -> tuple[Any, ...]:
    # The engine by weak reference and the session's creation time: two databases, or a
    # session id reused after a reset of the database, never share an entry.
    engine = weakref.ref(db.get_bind().engine)
    return (engine, session.id, session.created_at, as_of_seq, encoding, modalities)


@dataclass(frozen=True)
class ReceivedRequest:
    """A request as received: its JSON body, and the same parsed (exactly: see
    `app.api.json_body`), which a plan's stored form is made from without parsing it again."""

    body: bytes
    value: dict[str, Any]

    @functools.cached_property
    def text(self) -> str:
        """The body as text, for a plan that stores the request as received: decoded only
        then, after the answer (half a millisecond for a half-megabyte body that is not ASCII).
        A body sent as UTF-16 or UTF-32 is stored as its value's UTF-8 JSON."""
        try:
            return self.body.decode()
        except UnicodeDecodeError:
            return encode_json(self.value).decode()

    @classmethod
    def of(cls, request: AssembleRequest) -> ReceivedRequest:
        """`request` as a client would have sent it (its fields set, in JSON)."""
        body = request.model_dump_json(exclude_defaults=True).encode()
        return cls(body=body, value=decode_json(body))


def stored_request(
    request: AssembleRequest, received: ReceivedRequest
) -> tuple[str, Mapping[str, bytes]]:
    """The request as a plan keeps it (`app.domain.addressing`), from the request as received
    (and the same checked), and the bodies it names by digest."""
    if not any(source.items for source in request.sources):
        return received.text, {}
    addressed = address_bodies(received.value)
    if not addressed.bodies:
        return received.text, {}
    return encode_json(addressed.stored).decode(), addressed.bodies


def request_of(db: Session, request: str, *, tenant_id: int, session_key: int) -> dict[str, Any]:
    """A stored request (a plan's `request` column) as it was received, with the candidate
    bodies it names by digest read back. A body that is gone (which retention never does to a
    kept plan) is a 409 `stored_plan_mismatch`."""
    stored: dict[str, Any] = decode_json(request)
    digests = addressed_digests(stored)
    if not digests:
        return stored
    found = bodies.get_bodies(db, tenant_id=tenant_id, session_key=session_key, digests=digests)
    if len(found) < len(digests):
        raise StoredPlanMismatch(
            "the candidate bodies this plan's request names are no longer stored",
            details={"digests": sorted(digests - found.keys())},
        )
    return restore_bodies(stored, found)


def answer_of_row(db: Session, row: StoredAssembly) -> dict[str, Any]:
    """A stored plan's answer (`answer_of`), checked against the plan's `plan_hash`: a plan the
    log no longer yields is a 409 naming the positions whose items differ from the fingerprints
    the plan stored, never a silent change."""

    def from_log(history_from: Mapping[str, Any]) -> Sequence[Item]:
        # Items are stored by reference in session mode only, where both are set.
        assert row.session_id is not None
        assert row.as_of_seq is not None
        session = session_rows.get_session_by_pk(db, row.session_id)
        return shown_history(db, session=session, as_of_seq=row.as_of_seq)(history_from)

    answer = answer_of(
        row.response,
        history=from_log,
        candidates=lambda: offered(
            request_of(db, row.request, tenant_id=row.tenant_id, session_key=row.session_key)
        ),
    )
    items = answer["items"]
    if stored_plan_hash(items) == row.plan_hash:
        return answer
    differing = [
        item["position"]
        for item in items
        # Plans stored before fingerprints were cut hold all 64 digits.
        if not row.fingerprints[item["position"]][0].startswith(
            fingerprint_of(item["id"], item["source"], item["form"], item["content"], item["item"])
        )
    ]
    raise StoredPlanMismatch(
        f"the log no longer yields this plan (items at positions {differing[:20]} differ)",
        details={"positions": differing},
    )


def remember_shown_history(
    db: Session,
    session: SessionRow | SessionSnapshot,
    *,
    as_of_seq: int,
    encoding: str,
    modalities: frozenset[str],
    history: Sequence[HistoryEntry],
) -> None:
    """Keep the history an assembly showed (its input, state fragments left out) for the
    grader of its next action (the app's caches): the entries themselves, nothing copied."""
    key = _shown_key(db, session, as_of_seq=as_of_seq, encoding=encoding, modalities=modalities)
    caches = caches_of(db)
    with caches.shown_lock:
        caches.shown[key] = EntryItems(history)
