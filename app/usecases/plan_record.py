"""A stored plan read and written against the store and the log: the request as a plan keeps it
(its candidate bodies by digest, `app.storage.bodies`), the history its items name read from the
log (or from what the assembly left in the app's caches), and a plan's answer derived again
(`app.domain.stored_plan`, whose docstring states what a plan keeps) and checked against its
`plan_hash`: a plan the log no longer yields is a 409 `stored_plan_mismatch` naming the
positions whose items differ from the fingerprints it stored, never a silent change.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.contract.assembly import AssembleRequest
from app.domain.addressing import (
    address_bodies,
    addressed_digests,
    restore_bodies,
)
from app.domain.assemble.model import fingerprint_of, stored_plan_hash
from app.domain.errors import StoredPlanMismatch
from app.domain.history import EntryItems, HistoryEntry
from app.domain.items import Item
from app.domain.json_encoding import decode_json, encode_json
from app.domain.stored_plan import ShownHistory, answer_of, offered
from app.domain.world_state import is_state_fragment
from app.storage import bodies, session_rows
from app.storage.caches import caches_of
from app.storage.plans import StoredAssembly
from app.storage.session_rows import SessionSnapshot
from app.storage.tables import SessionRow
from app.usecases.loaded_history import load_history

__all__ = [
    "ReceivedRequest",
    "answer_of_row",
    "remember_shown_history",
    "request_of",
    "shown_history",
    "stored_request",
]


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
