"""Sessions: created (idempotent under concurrency, each row keyed by its tenant and name),
read by name or row id, and their calibration saved. None of these commits: the caller owns the
transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Boolean, and_, bindparam, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.errors import Conflict, SessionKeyCollision, session_not_found
from app.domain.ids import DERIVED_SESSION_KEYS_FROM, session_key
from app.domain.names import is_session_id
from app.storage.tables import SessionRow


def _now() -> datetime:
    return datetime.now(UTC)


def create_session(
    db: Session,
    *,
    tenant_id: int,
    external_id: str | None,
    encoding: str,
    context_window: int,
    model: str | None,
    attributes: dict[str, Any],
    derive_id: Callable[[int], str],
    parent: SessionRow | None = None,
    kind: str = "root",
    inherit: dict[str, Any] | None = None,
    unit: str | None = None,
) -> tuple[SessionRow, bool]:
    """Create a session, or return the existing one when every attribute matches.

    Returns `(session, created)`. A known id with different attributes raises `Conflict`.
    `derive_id(number)` names a session the client did not name, from a number no session was
    named from before. The row id is the session key derived from the tenant and the name
    (`ids.session_key`); a name whose key another session holds is refused
    (`SessionKeyCollision`), an unnamed session is named again. Creating is idempotent under
    concurrency too: of identical concurrent creations one creates, the others find it.
    """
    wanted = (encoding, context_window, model, attributes, parent.id if parent else None, kind)

    def existing_one(row: SessionRow) -> tuple[SessionRow, bool]:
        same = (
            row.encoding,
            row.context_window,
            row.model,
            row.attributes,
            row.parent_id,
            row.kind,
        )
        if same != wanted:
            raise Conflict(f"session {external_id!r} exists with different attributes")
        return row, False

    if external_id is not None:
        existing = db.scalar(
            _SESSION_BY_EXTERNAL_ID, {"tenant_id": tenant_id, "external_id": external_id}
        )
        if existing is not None:
            return existing_one(existing)
    for _ in range(_NAMING_ATTEMPTS):
        name = external_id if external_id is not None else derive_id(_session_number(db))
        key = session_key(tenant_id, name)
        row = SessionRow(
            id=key,
            tenant_id=tenant_id,
            external_id=name,
            encoding=encoding,
            context_window=context_window,
            model=model,
            attributes=attributes,
            last_seq=0,
            created_at=_now(),
            parent_id=parent.id if parent else None,
            kind=kind,
            fork_seq=parent.last_seq if parent is not None and kind == "fork" else None,
            inherit=inherit or {},
            unit=unit,
            # A child runs the parent's model: what the parent's usage taught holds for it too.
            calibration=parent.calibration if parent is not None else None,
        )
        try:
            with db.begin_nested():
                db.add(row)
        except IntegrityError:
            # The key is taken: by the same name, created by another request between our read
            # and our insert (PostgreSQL, where our insert waited for its commit; SQLite
            # serialises whole transactions), or by another name. The savepoint keeps the
            # transaction usable, and a new statement sees the committed row.
            holder = db.get_one(SessionRow, key, populate_existing=True)
            if external_id is None:
                continue  # a number is never drawn twice: the name is another one's key
            if (holder.tenant_id, holder.external_id) == (tenant_id, external_id):
                return existing_one(holder)
            raise SessionKeyCollision(
                f"session id {external_id!r} cannot be used: its key is another session's;"
                " choose another id"
            ) from None
        return row, True
    raise SessionKeyCollision(f"no free session key after {_NAMING_ATTEMPTS} names")


_NAMING_ATTEMPTS = 3
"""Names an unnamed session is given before giving up: each is refused only when its key,
62 bits of a hash, is another session's."""


def _session_number(db: Session) -> int:
    """A number no session was named from before: the sessions' sequence on PostgreSQL (which
    numbered sessions when it gave their row ids, so it is past every number so used); on
    SQLite, whose transactions are serial and whose sessions are never deleted, one more than
    there are sessions (row ids given on insert were dense, so that is past every one of
    them)."""
    if db.get_bind().engine.dialect.name == "postgresql":
        return int(db.scalar(_NEXT_SESSION_NUMBER) or 0)
    return int(db.scalar(select(func.count()).select_from(SessionRow)) or 0) + 1


_NEXT_SESSION_NUMBER = select(
    func.nextval(func.pg_get_serial_sequence(SessionRow.__tablename__, "id"))
)
IS_NAMED_SESSION = (
    SessionRow.tenant_id == bindparam("tenant_id"),
    SessionRow.external_id == bindparam("external_id"),
    or_(
        SessionRow.id
        == func.contextd_session_key(bindparam("tenant_id"), bindparam("external_id")),
        and_(
            SessionRow.id < DERIVED_SESSION_KEYS_FROM,
            func.contextd_has_legacy_sessions(type_=Boolean),
        ),
    ),
)
"""The tenant's session named by `external_id` (bind both): one condition for every lookup.

It carries the session key (`contextd_session_key`, computed by the database from the two
values, which the planner folds to a constant), so that a database sharded on the key routes
the lookup to one shard. A session created before keys were derived is found by its name and
tenant alone (its id is below `DERIVED_SESSION_KEYS_FROM`), but only in a database that holds
such sessions: elsewhere `contextd_has_legacy_sessions()` is a constant false, folded away, and
the lookup is by session key alone (see migration 20261205_0011)."""
_SESSION_BY_EXTERNAL_ID = select(SessionRow).where(*IS_NAMED_SESSION)
_SESSION_BY_EXTERNAL_ID_LOCKED = _SESSION_BY_EXTERNAL_ID.with_for_update()


def get_session(db: Session, *, tenant_id: int, external_id: str, lock: bool = False) -> SessionRow:
    """The tenant's session; another tenant's session is `NotFound`, exactly like a missing one.
    (Every request that names a session runs this, so its statements are built once.)"""
    if not is_session_id(external_id):
        # A path may name what no session can be called (with a NUL the database would
        # refuse, say): it names none.
        raise session_not_found(external_id)
    query = _SESSION_BY_EXTERNAL_ID_LOCKED if lock else _SESSION_BY_EXTERNAL_ID
    row = db.scalar(query, {"tenant_id": tenant_id, "external_id": external_id})
    if row is None:
        raise session_not_found(external_id)
    return row


def save_calibration(db: Session, *, session: SessionRow, calibration: dict[str, Any]) -> None:
    """Store the session's calibration. `session` must be locked: reports of one session
    calibrate one after another, each from the state the last one left."""
    session.calibration = calibration
    db.flush()


class SessionSnapshot(NamedTuple):
    """The columns of a session row that reading its history needs, read as plain columns by
    statements that need no ORM entity (a session-mode assembly's single lookup)."""

    id: int
    encoding: str
    context_window: int
    last_seq: int
    created_at: datetime
    kind: str
    parent_id: int | None
    fork_seq: int | None
    inherit: dict[str, Any]
    unit: str | None
    attributes: dict[str, Any]
    model: str | None
    calibration: dict[str, Any] | None


def get_session_by_pk(db: Session, pk: int, *, lock: bool = False) -> SessionRow:
    """The session whose row id is `pk` (row-locked with `lock`)."""
    return db.get_one(SessionRow, pk, with_for_update=True if lock else None)
