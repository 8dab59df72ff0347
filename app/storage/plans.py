"""Stored assembly plans: where a new plan goes, writing it, reading it back, pruning.

Guarantees, per engine:

- PostgreSQL: an assembly's reads run in autocommit (no BEGIN/COMMIT round trips). A stateless
  call reads its lineage (the latest fingerprints of the same tenant, session and unit) and
  draws its plan's row id (from the id sequence, so the public id is known before the row
  exists) in one statement; a session-mode call draws the row id, then reads the session row
  and the lineage. The plan is written after the answer has been sent, before the connection
  takes its next request (`store_or_defer`), and yet reads see it at once, on any connection
  and any replica of the database (read your writes):
  - from the row id on, the assembly's database connection holds session-level advisory
    locks: the plan's (keyed on its row id) and, in session mode, its session's. The plan is
    written on that connection, which releases them when it goes back to the pool, after the
    commit, whichever way the request ends (`app.storage.database`); a connection that cannot
    release them is closed, and the server releases them;
  - `get_assembly` on a miss looks for the plan among the plan locks held, waits for its lock
    and reads again: an answered id is never a 404 for want of its write;
  - a session's assemblies take turns, from taking the session's lock before reading the
    lineage to storing the plan, so the next call of a session measures its reused prefix
    against the plan before it (and its advice and cut point come from the facts, written
    before their calls answer).
  The waits are bounded by the statement timeout (`CTX_DB_TIMEOUT_SECONDS`; then a 503). A
  stateless call's reuse is measured against the newest plan stored for its lineage: it does
  not wait for one still being written on another connection. A write that fails is logged
  and counted (`contextd_plan_store_failures_total`), never retried: the caller has its answer,
  and its id is then not found (unless the write was sent and the database, having stalled,
  applies it when it answers again: an unanswered write is in doubt). Pinned by
  `tests/e2e/test_plan_storage.py` (real servers, a second connection and a second replica),
  `tests/e2e/test_faults.py` (a stalled write) and `tests/api/test_assemble_api.py`.
- SQLite: ids are assigned on insert, so the plan is stored before answering.

A plan's response and fingerprints are stored whole, or as deltas (`app.domain.json_delta`)
against its lineage's *base*, the latest plan of the lineage stored whole (`base_id`), when the
deltas are the smaller by far (`KEPT_AGAINST_BASE_SHARE`); a plan that is not becomes the next
base. Reads return them whole (`StoredAssembly`, `whole`). A base is of the same week as the
plans stored against it, so a weekly partition holds both, and pruning keeps every base a
kept plan is stored against; a plan whose base is gone anyway (a stray of the default
partition past the cutoff) reads as a `StoredPlanMismatch`, and its lineage's next plan
predicts no reuse and is stored whole.

Public ids are derived from the tenant and the row id (`asm_<uuid5>`), the same in every process.
Facts are never touched here; plans are pruned by age and count
(`app.storage.retention.prune_assemblies`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnExpressionArgument,
    Integer,
    ScalarSelect,
    Table,
    bindparam,
    column,
    func,
    insert,
    literal_column,
    select,
    table,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.elements import ColumnElement, SQLCoreOperations

from app.domain.assemble.model import FINGERPRINT_CHARS
from app.domain.errors import NotFound, StoredPlanMismatch, session_not_found
from app.domain.ids import derive_id, stateless_session_key
from app.domain.json_delta import delta, patched
from app.domain.json_encoding import encode_json
from app.domain.names import is_label
from app.storage import bodies
from app.storage.database import HOLDS_SESSION_LOCKS
from app.storage.session_rows import IS_NAMED_SESSION, SessionSnapshot
from app.storage.tables import (
    LINEAGE_SESSION,
    LINEAGE_UNIT,
    AssemblyRow,
    SessionRow,
    previous_call_filter,
    week_of,
)

log = logging.getLogger("contextd")


@dataclass(frozen=True)
class AssemblySlot:
    """Where a new assembly goes: its row id, what its lineage last showed a model, and the
    lineage's plan stored whole that the new one may be stored against.

    `row_id` is known up front on PostgreSQL and None on SQLite. `previous_fingerprints` are
    those of the latest stored assembly of the same tenant, session and unit ([] if none).
    `base_id`: the row id of that assembly, or of the plan it is stored against, when it is
    not stored whole (None: the lineage has none). `previous_state` and `previous_at`: that
    assembly's `NewAssembly.prefix_state`, and when it was made.
    """

    row_id: int | None
    previous_fingerprints: list[tuple[str, int]]
    base_id: int | None = None
    previous_state: Any = None
    previous_at: datetime | None = None


@dataclass(frozen=True)
class StoredAssembly:
    """A stored assembly as it was written: its response and fingerprints whole again where
    they were stored against an earlier plan (`base_id`)."""

    id: int
    tenant_id: int
    session_id: int | None
    session_key: int
    as_of_seq: int | None
    unit: str | None
    phase: str | None
    plan_hash: str
    request: str
    response: dict[str, Any]
    fingerprints: list[Any]
    created_at: datetime
    grounding: dict[str, Any] | None
    prefix_state: Any = None


@dataclass(frozen=True)
class NewAssembly:
    """One assembly to store: the request as the plan keeps it, with the candidate bodies it
    names by digest (`app.domain.addressing`), the response and plan as returned (without its
    own id: readers add it back), and the lineage it belongs to."""

    tenant_id: int
    session_pk: int | None
    as_of_seq: int | None
    unit: str | None
    phase: str | None
    plan_hash: str
    request: str
    response: dict[str, Any]
    fingerprints: list[Any]
    bodies: Mapping[str, bytes] = field(default_factory=dict)
    prefix_state: list[Any] | None = None
    """What its prompt prefix was built from: small, stored whole (`AssemblySlot`)."""
    created_at: datetime | None = None
    """When it was made (None: when it is stored)."""

    @property
    def session_key(self) -> int:
        """The key it and its candidate bodies are stored under (`app.domain.ids`)."""
        if self.session_pk is None:
            return stateless_session_key(self.tenant_id)
        return self.session_pk


KEPT_AGAINST_BASE_SHARE = 0.35
"""A plan is stored against its lineage's plan stored whole (`base_id`) when its deltas take at
most this share of its whole form, else whole, becoming the base of the plans after it. On the
public runs' replay, 0.3 to 0.4 store the least (`bench/plan_store.py`): lower, and bases come
too often; higher, and deltas grow long before a new base starts."""


def _lineage(
    tenant: ColumnExpressionArgument[int],
    session_key: ColumnExpressionArgument[int],
    unit_key: ColumnExpressionArgument[str],
    called: ColumnElement[bool] | None = None,
) -> tuple[ScalarSelect[Any], ...]:
    """What the next assembly of a lineage reads of its previous call, the newest assembly
    `called` admits (default: the newest; see `previous_call_filter`): its fingerprints (a
    delta when stored against a base), the base the next plan may be stored against (of the
    newest assembly), that call's base fingerprints, its prefix state and when it was made.
    Each is a backward walk of the lineage's index, one step unless a call was superseded."""

    def newest(value: SQLCoreOperations[Any], *, call: bool = True) -> ScalarSelect[Any]:
        # The index expressions on the left: their `==` builds the SQL comparison for any
        # operand.
        query = select(value).where(
            AssemblyRow.tenant_id == tenant,
            LINEAGE_SESSION == session_key,  # noqa: SIM300
            LINEAGE_UNIT == unit_key,  # noqa: SIM300
        )
        if call and called is not None:
            query = query.where(called)
        return query.order_by(AssemblyRow.id.desc()).limit(1).scalar_subquery()

    base = aliased(AssemblyRow)
    base_fingerprints = (
        select(base.fingerprints)
        .where(base.id == newest(AssemblyRow.base_id), base.session_key == session_key)
        .scalar_subquery()
    )
    return (
        newest(AssemblyRow.fingerprints),
        newest(func.coalesce(AssemblyRow.base_id, AssemblyRow.id), call=False),
        base_fingerprints,
        newest(AssemblyRow.prefix_state),
        newest(AssemblyRow.created_at),
    )


_SESSION_LOCKS = 0x63747864
"""The class of the sessions' advisory locks (two-part keys). A plan's lock is keyed on its
row id alone (one-part keys), which `_PLAN_LOCKS_HELD` lists."""


def _session_lock(tenant_id: int, session_id: str) -> int:
    """The second part of a session's lock key: 32 bits of a hash, the same in every process
    (two sessions sharing it only wait for each other)."""
    digest = hashlib.blake2b(f"{tenant_id}/{session_id}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


# Every statement is built once: an assembly runs one or two of them per call.
_NEXT_ASSEMBLY_ID = func.nextval(func.pg_get_serial_sequence(AssemblyRow.__tablename__, "id"))
_LATEST = _lineage(bindparam("tenant_id"), bindparam("session_key"), bindparam("unit_key"))
_LINEAGE_ONLY = select(*_LATEST)
# The plan's row id and its lock, held by the connection until it goes back to the pool (see
# `store_or_defer`). A subquery with a volatile function is not merged: nextval runs once.
_RESERVED = select(_NEXT_ASSEMBLY_ID.label("row_id")).subquery("reserved")
_HOLD_PLAN = func.pg_advisory_lock(_RESERVED.c.row_id)
_LINEAGE_AND_NEXT_ID = select(_RESERVED.c.row_id, _HOLD_PLAN, *_LATEST)
# A session's assemblies hold its lock from here until their plans are stored, so this waits
# for the one under way. The lineage is read by the next statement, whose snapshot sees what
# that one committed.
_HOLD_SESSION_AND_NEXT_ID = select(
    _RESERVED.c.row_id,
    func.pg_advisory_lock(_SESSION_LOCKS, bindparam("session_lock", type_=Integer)),
    _HOLD_PLAN,
)
# A named session's lineage, correlated with its row: its unit is the call's, else the
# session's own (a child session's tokens are accounted under its unit).
_SESSION_LINEAGE = tuple(
    read.correlate(SessionRow)
    for read in _lineage(
        SessionRow.tenant_id,
        SessionRow.id,
        func.coalesce(bindparam("unit"), SessionRow.unit, literal_column("''")),
        previous_call_filter(SessionRow.id, last_seq=SessionRow.last_seq),
    )
)
_SESSION_AND_LINEAGE = select(
    *(getattr(SessionRow, column) for column in SessionSnapshot._fields), *_SESSION_LINEAGE
).where(*IS_NAMED_SESSION)
_SNAPSHOT_WIDTH = len(SessionSnapshot._fields)
# The one-part advisory locks held in this database: plans' row ids (`_HOLD_PLAN`).
_PG_LOCKS = table(
    "pg_locks",
    *(column(name) for name in ("locktype", "database", "classid", "objid", "objsubid")),
    column("granted", Boolean),
)
_PLAN_LOCKS_HELD = select(
    _PG_LOCKS.c.classid.cast(BigInteger)
    .op("<<")(literal_column("32"))
    .op("|")(_PG_LOCKS.c.objid.cast(BigInteger))
).where(
    _PG_LOCKS.c.locktype == "advisory",
    _PG_LOCKS.c.objsubid == 1,
    _PG_LOCKS.c.granted,
    _PG_LOCKS.c.database
    == select(literal_column("oid"))
    .select_from(table("pg_database"))
    .where(literal_column("datname") == func.current_database())
    .scalar_subquery(),
)
_AWAIT_PLAN = select(func.pg_advisory_xact_lock_shared(bindparam("row_id", type_=BigInteger)))
# A plan's row (Core, no ORM bookkeeping), its values as parameters: a statement built with
# `.values(...)` would be keyed for the compiled cache anew on every call, values included.
_PLANS = cast(Table, AssemblyRow.__table__)
_INSERT_PLAN = insert(_PLANS)


def _ids_reserved_up_front(db: Session) -> bool:
    return db.get_bind().engine.dialect.name == "postgresql"


def _slot(
    row_id: Any, previous: Any, base_id: Any, base_prints: Any, state: Any, at: Any
) -> AssemblySlot:
    """The slot from the lineage's reads (`_lineage`). A latest plan stored against a base that
    is no longer kept predicts nothing, and the next plan is stored whole."""
    if isinstance(previous, dict):  # a delta
        if base_prints is None:
            previous, base_id = None, None
        else:
            previous = patched(base_prints, previous)
    return AssemblySlot(
        row_id=None if row_id is None else int(row_id),
        # Plans stored before fingerprints were cut compare on their first digits.
        previous_fingerprints=[(str(f)[:FINGERPRINT_CHARS], int(t)) for f, t in previous or []],
        base_id=None if base_id is None else int(base_id),
        previous_state=state,
        previous_at=at,
    )


def open_assembly(
    db: Session, *, tenant_id: int, session_id: str | None, unit: str | None
) -> tuple[SessionSnapshot | None, AssemblySlot]:
    """The named session's row (None for a stateless call) and the new assembly's slot, on the
    session's connection: one statement, or on PostgreSQL in session mode two, the first
    waiting for the session's assembly under way, if any, to have stored its plan.

    On PostgreSQL the reads autocommit, unless `db` already began (a replay has read its
    stored assembly). They need no common snapshot: facts are append-only and read up to the
    session row's last_seq, so the row and the facts agree whatever commits in between; the
    sequence value drawn for the row id is not returned by any rollback anyway. The plan's
    lock, and in session mode the session's, are then held by `db`'s connection until it goes
    back to the pool (`store_or_defer`).
    """
    reserve = _ids_reserved_up_front(db)
    if reserve and not db.in_transaction():
        db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
    connection = db.connection()
    if reserve:
        connection.info[HOLDS_SESSION_LOCKS] = True
    if session_id is None:
        lineage = {
            "tenant_id": tenant_id,
            "session_key": stateless_session_key(tenant_id),
            "unit_key": unit or "",
        }
        if reserve:
            row_id, _, *latest = connection.execute(_LINEAGE_AND_NEXT_ID, lineage).one()
            return None, _slot(row_id, *latest)
        return None, _slot(None, *connection.execute(_LINEAGE_ONLY, lineage).one())
    row_id = None
    if reserve:
        session_lock = {"session_lock": _session_lock(tenant_id, session_id)}
        row_id = connection.execute(_HOLD_SESSION_AND_NEXT_ID, session_lock).one()[0]
    params = {"tenant_id": tenant_id, "external_id": session_id, "unit": unit}
    found = connection.execute(_SESSION_AND_LINEAGE, params).one_or_none()
    if found is None:
        raise session_not_found(session_id)
    snapshot = SessionSnapshot._make(found[:_SNAPSHOT_WIDTH])
    return snapshot, _slot(row_id, *found[_SNAPSHOT_WIDTH:])


def _assembly_id_deriver(tenant_id: int) -> Callable[[int], str]:
    return functools.partial(derive_id, "asm", tenant_id)


def _base(db: Session, *, session_key: int, base_id: int) -> Any:
    """The response, fingerprints and creation time of the plan `base_id`, stored whole, of the
    session key's lineages; None when no such plan is kept."""
    return db.execute(
        select(AssemblyRow.response, AssemblyRow.fingerprints, AssemblyRow.created_at).where(
            AssemblyRow.session_key == session_key,
            AssemblyRow.id == base_id,
            AssemblyRow.base_id.is_(None),
        )
    ).one_or_none()


def _stored_form(
    db: Session, assembly: NewAssembly, *, base_id: int | None, now: datetime
) -> tuple[Any, Any, int | None]:
    """The response and fingerprints as the row keeps them, and the base they are deltas
    against: the lineage's base `base_id` when it is kept, of this week (so that it ages out
    with the plan, in the same partition) and the deltas take at most
    `KEPT_AGAINST_BASE_SHARE` of the whole; else whole, and None."""
    whole = assembly.response, assembly.fingerprints, None
    if base_id is None:
        return whole
    base = _base(db, session_key=assembly.session_key, base_id=base_id)
    if base is None or week_of(base.created_at) != week_of(now):
        return whole
    response = delta(base.response, assembly.response)
    fingerprints = delta(base.fingerprints, assembly.fingerprints)
    whole_bytes = len(encode_json(assembly.response)) + len(encode_json(assembly.fingerprints))
    if len(encode_json(response)) + len(encode_json(fingerprints)) > (
        KEPT_AGAINST_BASE_SHARE * whole_bytes
    ):
        return whole
    return response, fingerprints, base_id


def store_assembly(
    db: Session,
    assembly: NewAssembly,
    *,
    row_id: int | None,
    derive_id: Callable[[int], str],
    base_id: int | None = None,
) -> str:
    """Store `assembly` under `row_id` (None: the engine assigns one), against the lineage's
    base `base_id` where that is smaller (`_stored_form`), and the candidate bodies it names;
    returns its public id. One statement when the row id is known, the bodies are
    (`bodies.put_bodies`) and it is stored whole, more otherwise."""
    now = assembly.created_at or datetime.now(UTC)
    response, fingerprints, base_id = _stored_form(db, assembly, base_id=base_id, now=now)
    bodies.put_bodies(
        db,
        tenant_id=assembly.tenant_id,
        session_key=assembly.session_key,
        bodies=assembly.bodies,
        now=now,
    )
    values = {
        "tenant_id": assembly.tenant_id,
        "session_id": assembly.session_pk,
        "session_key": assembly.session_key,
        "as_of_seq": assembly.as_of_seq,
        "unit": assembly.unit,
        "phase": assembly.phase,
        "plan_hash": assembly.plan_hash,
        "request": assembly.request,
        "response": response,
        "fingerprints": fingerprints,
        "prefix_state": assembly.prefix_state,
        "base_id": base_id,
        "created_at": now,
    }
    if row_id is not None:
        external_id = derive_id(row_id)
        db.execute(_INSERT_PLAN, {"id": row_id, "external_id": external_id, **values})
        return external_id
    assigned = db.execute(_INSERT_PLAN.returning(_PLANS.c.id), values)
    row_id = assigned.scalar_one()
    external_id = derive_id(row_id)
    db.execute(update(AssemblyRow).where(AssemblyRow.id == row_id).values(external_id=external_id))
    return external_id


def store_now(db: Session, assembly: NewAssembly, *, slot: AssemblySlot) -> str:
    """Store `assembly` in the caller's transaction (which the caller commits); its id."""
    return store_assembly(
        db,
        assembly,
        row_id=slot.row_id,
        derive_id=_assembly_id_deriver(assembly.tenant_id),
        base_id=slot.base_id,
    )


def store_or_defer(
    db: Session, build: Callable[[], NewAssembly], *, tenant_id: int, slot: AssemblySlot
) -> tuple[str, Callable[[], float | None] | None]:
    """The assembly's id, with the write still to do after answering when its id was known up
    front (PostgreSQL), else None (built, stored and committed now). `build` makes what is
    stored; when the write is deferred, so is the building.

    The deferred write runs on `db`, whose connection still holds the plan's lock and its
    session's (`open_assembly`), so `db` must not end before it: the request's session is
    closed only once the response has finished, the write included. Closing `db` after the
    write hands the connection back to the pool, which releases the locks, after the commit;
    any other way `db` ends (a failure, an exception before the answer) hands it back too, or
    closes it.
    """
    if slot.row_id is None:
        assembly_id = store_now(db, build(), slot=slot)
        db.commit()
        return assembly_id, None
    derive = _assembly_id_deriver(tenant_id)
    write = functools.partial(
        store_after_answer, db, build, row_id=slot.row_id, derive=derive, base_id=slot.base_id
    )
    return derive(slot.row_id), write


def store_after_answer(
    db: Session,
    build: Callable[[], NewAssembly],
    *,
    row_id: int,
    derive: Callable[[int], str],
    base_id: int | None = None,
) -> float | None:
    """Build and write a plan whose id was already handed out, then close `db`; the seconds
    it took, or None when the write failed (logged, never retried: the caller has its
    answer)."""
    started = time.perf_counter()
    try:
        with db:
            store_assembly(db, build(), row_id=row_id, derive_id=derive, base_id=base_id)
            db.commit()
    except SQLAlchemyError:
        log.exception("assembly %s was answered but could not be stored", derive(row_id))
        return None
    return time.perf_counter() - started


def whole(
    db: Session, *, session_key: int, base_id: int | None, response: Any, fingerprints: Any
) -> tuple[dict[str, Any], list[Any]]:
    """A stored plan's response and fingerprints whole: as stored, or patched onto those of the
    base they are stored against. A plan whose base is no longer kept (retention keeps every
    base a kept plan is stored against, but a base of the default partition past the cutoff
    may go a round before the plans of its week) is a `StoredPlanMismatch`."""
    if base_id is None:
        return response, fingerprints
    base = _base(db, session_key=session_key, base_id=base_id)
    if base is None:
        raise StoredPlanMismatch(
            "this plan was stored against an earlier plan that is no longer kept",
            details={"base_plan": base_id},
        )
    return patched(base.response, response), patched(base.fingerprints, fingerprints)


def get_assembly(
    db: Session, *, tenant_id: int, external_id: str, session_key: int | None = None
) -> StoredAssembly:
    """The tenant's stored assembly. On PostgreSQL a miss looks for the plan among those whose
    locks are held (answered, or about to be, and not yet stored), waits for its lock (bounded
    by the statement timeout), then reads again.

    A caller that knows the plan's session names its key (`NewAssembly.session_key`): the
    lookup then carries the distribution column, so a sharded database reads one shard. Only
    a miss (a plan of another session, not yet stored, or none) looks everywhere."""
    if not is_label(external_id):  # with a NUL, say, which the database would refuse
        raise NotFound(f"assembly {external_id!r} not found")
    stored = select(AssemblyRow).where(
        AssemblyRow.tenant_id == tenant_id, AssemblyRow.external_id == external_id
    )
    if session_key is not None:
        row = db.scalar(stored.where(AssemblyRow.session_key == session_key))
        if row is not None:
            return _read(db, row)
    row = db.scalar(stored)
    if row is None and _ids_reserved_up_front(db):
        derive = _assembly_id_deriver(tenant_id)
        held = db.scalars(_PLAN_LOCKS_HELD)
        row_id = next((held_id for held_id in held if derive(held_id) == external_id), None)
        if row_id is not None:
            db.execute(_AWAIT_PLAN, {"row_id": row_id})
        row = db.scalar(stored)
    if row is None:
        raise NotFound(f"assembly {external_id!r} not found")
    return _read(db, row)


def _read(db: Session, row: AssemblyRow) -> StoredAssembly:
    response, fingerprints = whole(
        db,
        session_key=row.session_key,
        base_id=row.base_id,
        response=row.response,
        fingerprints=row.fingerprints,
    )
    return StoredAssembly(
        id=row.id,
        tenant_id=row.tenant_id,
        session_id=row.session_id,
        session_key=row.session_key,
        as_of_seq=row.as_of_seq,
        unit=row.unit,
        phase=row.phase,
        plan_hash=row.plan_hash,
        request=row.request,
        response=response,
        fingerprints=fingerprints,
        created_at=row.created_at,
        grounding=row.grounding,
        prefix_state=row.prefix_state,
    )
