"""Repository functions over the fact log. None of them commits: the caller owns the transaction.

Appends serialise per session on the session row (`SELECT ... FOR UPDATE` in PostgreSQL,
the database write lock in SQLite), so sequence numbers are gap-free and dense; the
`(session_id, seq)` primary key is the last line of defence against a duplicate. A client's
batch on PostgreSQL takes the row lock in the statement that writes it (`app.storage.appends`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    Boolean,
    Row,
    and_,
    bindparam,
    exists,
    func,
    insert,
    or_,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.compaction import CompactionResult
from app.domain.errors import (
    Conflict,
    IdempotencyMismatch,
    NotFound,
    SequenceConflict,
    SessionKeyCollision,
    session_not_found,
)
from app.domain.facts import NewFact, compaction_fact
from app.domain.ids import DERIVED_SESSION_KEYS_FROM, derive_id, session_key
from app.domain.names import is_label, is_session_id
from app.storage.tables import (
    ApiKey,
    Fact,
    Manifest,
    SessionRow,
    Tenant,
)


@dataclass(frozen=True)
class AppendedFact:
    seq: int
    type: str
    tokens: int


@dataclass(frozen=True)
class AppendResult:
    facts: tuple[AppendedFact, ...]
    replayed: bool
    """True when the idempotency key had been seen: nothing was written."""
    timeline: int | None = None
    """The database timeline that wrote the facts (`Fact.timeline`): one batch, one
    transaction, one timeline."""

    @classmethod
    def written(
        cls, first_seq: int, facts: Sequence[NewFact], *, timeline: int | None
    ) -> AppendResult:
        """`facts`, written from `first_seq` on, on `timeline`."""
        return cls(
            facts=tuple(
                AppendedFact(first_seq + offset, fact.type, fact.tokens)
                for offset, fact in enumerate(facts)
            ),
            replayed=False,
            timeline=timeline,
        )


def _now() -> datetime:
    return datetime.now(UTC)


def ensure_tenant(db: Session, name: str) -> int:
    tenant_id = db.scalar(select(Tenant.id).where(Tenant.name == name))
    if tenant_id is not None:
        return tenant_id
    try:
        with db.begin_nested():
            tenant = Tenant(name=name, created_at=_now())
            db.add(tenant)
    except IntegrityError:
        # Another request created it between our read and our insert.
        return db.scalars(select(Tenant.id).where(Tenant.name == name)).one()
    return tenant.id


def add_api_key(db: Session, *, tenant_id: int, key_hash: str) -> int:
    key = ApiKey(tenant_id=tenant_id, key_hash=key_hash, created_at=_now())
    db.add(key)
    db.flush()
    return key.id


def find_tenant_by_key_hash(db: Session, key_hash: str) -> int | None:
    """The tenant of a key that is not revoked."""
    return db.scalar(
        select(ApiKey.tenant_id).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
    )


class KeyListing(NamedTuple):
    id: int
    tenant: str
    fingerprint: str
    """The first 12 hex digits of the key's SHA-256: enough to tell keys apart, useless to use."""
    created_at: datetime
    revoked_at: datetime | None


def list_api_keys(db: Session, *, tenant: str | None = None) -> list[KeyListing]:
    query = (
        select(ApiKey.id, Tenant.name, ApiKey.key_hash, ApiKey.created_at, ApiKey.revoked_at)
        .join(Tenant, Tenant.id == ApiKey.tenant_id)
        .order_by(ApiKey.id)
    )
    if tenant is not None:
        query = query.where(Tenant.name == tenant)
    return [
        KeyListing(key_id, name, key_hash[:12], created, revoked)
        for key_id, name, key_hash, created, revoked in db.execute(query)
    ]


def revoke_api_key(db: Session, key_id: int) -> KeyListing | None:
    """Revokes key `key_id` (again: no change); None when there is no such key."""
    key = db.get(ApiKey, key_id)
    if key is None:
        return None
    if key.revoked_at is None:
        key.revoked_at = _now()
        db.flush()
    listed = list_api_keys(db)
    return next(entry for entry in listed if entry.id == key_id)


def has_api_keys(db: Session) -> bool:
    return bool(db.scalar(select(exists().where(ApiKey.id.is_not(None)))))


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


def replay_batch(
    db: Session,
    *,
    session_pk: int,
    facts: Sequence[NewFact],
    unit: str | None,
    phase: str | None,
    idempotency_key: str,
) -> AppendResult | None:
    """The batch `idempotency_key` wrote, as first written, when `facts` are that batch (the
    same items in the same order, as stored, with the same originals, provenance, unit and
    phase; JSON values compared, not bytes); None when the key wrote nothing; with another
    batch `IdempotencyMismatch`."""
    earlier = db.execute(
        select(
            Fact.seq,
            Fact.type,
            Fact.tokens,
            Fact.item,
            Fact.original,
            Fact.provenance,
            Fact.unit,
            Fact.phase,
            Fact.timeline,
        )
        .where(Fact.session_id == session_pk, Fact.idempotency_key == idempotency_key)
        .order_by(Fact.seq)
    ).all()
    if not earlier:
        return None
    kept = [(f.item, f.original, f.provenance, f.unit, f.phase) for f in earlier]
    sent = [(f.item, f.original, f.provenance, unit, phase) for f in facts]
    if kept != sent:
        raise IdempotencyMismatch(
            key=idempotency_key, first_seq=earlier[0].seq, last_seq=earlier[-1].seq
        )
    return AppendResult(
        facts=tuple(AppendedFact(f.seq, f.type, f.tokens) for f in earlier),
        replayed=True,
        timeline=earlier[0].timeline,
    )


def append_facts(
    db: Session,
    *,
    session: SessionRow,
    facts: Sequence[NewFact],
    unit: str | None = None,
    phase: str | None = None,
    idempotency_key: str | None = None,
    expected_last_seq: int | None = None,
    recorded_at: datetime,
) -> AppendResult:
    """Append `facts` atomically after the session's last seq, recorded at `recorded_at` (the
    service's clock: `app.clock`). `session` must be locked.

    A known `idempotency_key` is a replay when the batch is the same as the one the key
    names (`replay_batch`): nothing is written and the original result is returned. With another
    batch it is `IdempotencyMismatch`.
    """
    if idempotency_key is not None:
        replayed = replay_batch(
            db,
            session_pk=session.id,
            facts=facts,
            unit=unit,
            phase=phase,
            idempotency_key=idempotency_key,
        )
        if replayed is not None:
            return replayed
    if expected_last_seq is not None and expected_last_seq != session.last_seq:
        raise SequenceConflict(expected=expected_last_seq, actual=session.last_seq)
    first_seq = session.last_seq + 1
    rows = [
        {
            "session_id": session.id,
            "seq": first_seq + offset,
            "type": fact.type,
            "item": fact.item,
            "tokens": fact.tokens,
            "unit": unit,
            "phase": phase,
            "provenance": fact.provenance,
            "idempotency_key": idempotency_key,
            "recorded_at": recorded_at,
            "original": fact.original,
        }
        for offset, fact in enumerate(facts)
    ]
    try:
        timelines = db.scalars(insert(Fact).returning(Fact.timeline), rows).all()
    except IntegrityError as exc:
        raise SequenceConflict(expected=session.last_seq, actual=session.last_seq + 1) from exc
    session.last_seq = first_seq + len(rows) - 1
    db.flush()
    return AppendResult.written(first_seq, facts, timeline=timelines[0])


def append_compaction(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    expected_last_seq: int,
    result: CompactionResult,
    requested_strategy: str,
    recorded_at: datetime,
) -> str:
    """Append a compaction fact and return its derived id, unless the session moved on since
    the compacted history was read (`SequenceConflict`)."""
    session = get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    if session.last_seq != expected_last_seq:
        raise SequenceConflict(expected=expected_last_seq, actual=session.last_seq)
    compaction_id = derive_id("cmp", tenant_id, session.id, session.last_seq + 1)
    fact = compaction_fact(
        result, compaction_id=compaction_id, requested_strategy=requested_strategy
    )
    append_facts(db, session=session, facts=[fact], recorded_at=recorded_at)
    return compaction_id


def read_facts(
    db: Session,
    *,
    session_id: int,
    after_seq: int = 0,
    limit: int | None = None,
    up_to_seq: int | None = None,
) -> Sequence[Row[Any]]:
    """Facts in seq order, as read-only rows (attribute access by column name).

    Rows, not ORM objects: facts are never modified, and skipping the identity map makes
    reading a 10,000-item log several times faster.
    """
    facts = Fact.__table__
    query = (
        select(facts)
        .where(facts.c.session_id == session_id, facts.c.seq > after_seq)
        .order_by(facts.c.seq)
    )
    if up_to_seq is not None:
        query = query.where(facts.c.seq <= up_to_seq)
    if limit is not None:
        query = query.limit(limit)
    return db.execute(query).all()


def fact_items(db: Session, *, session_id: int, seqs: Sequence[int]) -> list[tuple[int, Any]]:
    """(seq, item) of the facts `seqs` of the session, in seq order (one read)."""
    if not seqs:
        return []
    facts = Fact.__table__
    return [
        (row.seq, row.item)
        for row in db.execute(
            select(facts.c.seq, facts.c.item)
            .where(facts.c.session_id == session_id, facts.c.seq.in_(seqs))
            .order_by(facts.c.seq)
        )
    ]


def get_fact(db: Session, *, session_id: int, seq: int) -> Row[Any] | None:
    """Fact `seq` of the session, as a read-only row; None when the log has no such seq."""
    facts = Fact.__table__
    query = select(facts).where(facts.c.session_id == session_id, facts.c.seq == seq)
    return db.execute(query).first()


def put_manifest(db: Session, *, tenant_id: int, name: str, document: dict[str, Any]) -> int:
    """Store a new version of a manifest and return its version number."""
    latest = db.scalar(
        select(func.max(Manifest.version)).where(
            Manifest.tenant_id == tenant_id, Manifest.name == name
        )
    )
    version = (latest or 0) + 1
    db.add(
        Manifest(
            tenant_id=tenant_id, name=name, version=version, document=document, created_at=_now()
        )
    )
    try:
        db.flush()
    except IntegrityError as exc:
        raise Conflict(f"manifest {name!r} was updated concurrently; retry") from exc
    return version


def get_manifest(db: Session, *, tenant_id: int, name: str) -> Manifest:
    if not is_label(name):
        raise NotFound(f"manifest {name!r} not found")
    row = db.scalar(
        select(Manifest)
        .where(Manifest.tenant_id == tenant_id, Manifest.name == name)
        .order_by(Manifest.version.desc())
        .limit(1)
    )
    if row is None:
        raise NotFound(f"manifest {name!r} not found")
    return row
