"""Stored assembly plans: where a new plan goes, writing it, reading it back, pruning.

Guarantees, per engine:

- PostgreSQL: an assembly's reads run in autocommit (no BEGIN/COMMIT round trips), and its
  lineage (the latest fingerprints of the same tenant, session and unit), its plan's row id
  (drawn from the id sequence, so the public id is known before the row exists) and, in session
  mode, the session row are read in one statement. The plan is written after the answer has
  been sent and before the connection takes its next request (`store_or_defer`): the next
  request on the same connection always finds it; a request on another connection may miss it
  for the few milliseconds the write takes. A write that fails is logged and counted
  (`contextd_plan_store_failures_total`), never retried: the caller has its answer.
  Pinned by `tests/e2e/test_plan_storage.py` and `tests/api/test_assemble_api.py`.
- SQLite: ids are assigned on insert, so the plan is stored before answering.

Public ids are derived from the tenant and the row id (`asm_<uuid5>`), the same in every process.
Facts are never touched here; plans are pruned by age and count (`prune_assemblies`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnExpressionArgument,
    ScalarSelect,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.domain.errors import NotFound
from app.domain.ids import derive_id
from app.metrics import PLAN_STORE_FAILURES, PLAN_STORE_LATENCY
from app.storage.repository import IS_NAMED_SESSION, SessionSnapshot
from app.storage.tables import LINEAGE_SESSION, LINEAGE_UNIT, AssemblyRow, SessionRow

log = logging.getLogger("contextd")


@dataclass(frozen=True)
class AssemblySlot:
    """Where a new assembly goes: its row id, and what its lineage last showed a model.

    `row_id` is known up front on PostgreSQL and None on SQLite. `previous_fingerprints` are
    those of the latest stored assembly of the same tenant, session and unit ([] if none).
    """

    row_id: int | None
    previous_fingerprints: list[tuple[str, int]]


@dataclass(frozen=True)
class NewAssembly:
    """One assembly to store: the request as received, the response and plan as returned
    (without its own id: readers add it back), and the lineage it belongs to."""

    tenant_id: int
    session_pk: int | None
    as_of_seq: int | None
    unit: str | None
    phase: str | None
    plan_hash: str
    request: str
    response: dict[str, Any]
    fingerprints: list[Any]


def _latest_fingerprints(
    tenant: ColumnExpressionArgument[int],
    session_key: ColumnExpressionArgument[int],
    unit_key: ColumnExpressionArgument[str],
) -> ScalarSelect[Any]:
    """The fingerprints of a lineage's latest assembly: one backward step in its index."""
    # The index expressions on the left: their `==` builds the SQL comparison for any operand.
    return (
        select(AssemblyRow.fingerprints)
        .where(
            AssemblyRow.tenant_id == tenant,
            LINEAGE_SESSION == session_key,  # noqa: SIM300
            LINEAGE_UNIT == unit_key,  # noqa: SIM300
        )
        .order_by(AssemblyRow.id.desc())
        .limit(1)
        .scalar_subquery()
    )


# Every statement is built once: an assembly runs one of them per call.
_NEXT_ASSEMBLY_ID = func.nextval(func.pg_get_serial_sequence(AssemblyRow.__tablename__, "id"))
_LATEST_FINGERPRINTS = _latest_fingerprints(
    bindparam("tenant_id"), bindparam("session_key"), bindparam("unit_key")
)
_LINEAGE_ONLY = select(_LATEST_FINGERPRINTS)
_LINEAGE_AND_NEXT_ID = select(_NEXT_ASSEMBLY_ID, _LATEST_FINGERPRINTS)
# A named session's lineage, correlated with its row: its unit is the call's, else the
# session's own (a child session's tokens are accounted under its unit).
_SESSION_LINEAGE = _latest_fingerprints(
    SessionRow.tenant_id,
    SessionRow.id,
    func.coalesce(bindparam("unit"), SessionRow.unit, literal_column("''")),
).correlate(SessionRow)
_SESSION_AND_LINEAGE = select(
    *(getattr(SessionRow, column) for column in SessionSnapshot._fields), _SESSION_LINEAGE
).where(*IS_NAMED_SESSION)
_SESSION_AND_LINEAGE_AND_NEXT_ID = _SESSION_AND_LINEAGE.add_columns(_NEXT_ASSEMBLY_ID)
_SNAPSHOT_WIDTH = len(SessionSnapshot._fields)


def _ids_reserved_up_front(db: Session) -> bool:
    return db.get_bind().engine.dialect.name == "postgresql"


def _slot(previous: Any, next_id: list[Any]) -> AssemblySlot:
    return AssemblySlot(
        row_id=int(next_id[0]) if next_id else None,
        previous_fingerprints=[(str(f), int(t)) for f, t in previous or []],
    )


def open_assembly(
    db: Session, *, tenant_id: int, session_id: str | None, unit: str | None
) -> tuple[SessionSnapshot | None, AssemblySlot]:
    """The named session's row (None for a stateless call) and the new assembly's slot, in one
    statement on the session's connection.

    On PostgreSQL the reads autocommit, unless `db` already began (a replay has read its
    stored assembly). They need no common snapshot: facts are append-only and read up to the
    session row's last_seq, so the row and the facts agree whatever commits in between; the
    sequence value drawn for the row id is not returned by any rollback anyway.
    """
    reserve = _ids_reserved_up_front(db)
    if reserve and not db.in_transaction():
        db.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
    connection = db.connection()
    if session_id is None:
        lineage = {"tenant_id": tenant_id, "session_key": 0, "unit_key": unit or ""}
        if reserve:
            row_id, previous = connection.execute(_LINEAGE_AND_NEXT_ID, lineage).one()
            return None, _slot(previous, [row_id])
        return None, _slot(connection.execute(_LINEAGE_ONLY, lineage).scalar(), [])
    params = {"tenant_id": tenant_id, "external_id": session_id, "unit": unit}
    statement = _SESSION_AND_LINEAGE_AND_NEXT_ID if reserve else _SESSION_AND_LINEAGE
    found = connection.execute(statement, params).one_or_none()
    if found is None:
        raise NotFound(f"session {session_id!r} not found")
    previous, *next_id = found[_SNAPSHOT_WIDTH:]
    return SessionSnapshot._make(found[:_SNAPSHOT_WIDTH]), _slot(previous, next_id)


def _assembly_id_deriver(tenant_id: int) -> Callable[[int], str]:
    return functools.partial(derive_id, "asm", tenant_id)


def store_assembly(
    db: Session, assembly: NewAssembly, *, row_id: int | None, derive_id: Callable[[int], str]
) -> str:
    """Store `assembly` under `row_id` (None: the engine assigns one); returns its public id.
    One statement when the row id is known, two otherwise."""
    values = {
        "tenant_id": assembly.tenant_id,
        "session_id": assembly.session_pk,
        "as_of_seq": assembly.as_of_seq,
        "unit": assembly.unit,
        "phase": assembly.phase,
        "plan_hash": assembly.plan_hash,
        "request": assembly.request,
        "response": assembly.response,
        "fingerprints": assembly.fingerprints,
        "created_at": datetime.now(UTC),
    }
    if row_id is not None:
        external_id = derive_id(row_id)
        db.execute(insert(AssemblyRow).values(id=row_id, external_id=external_id, **values))
        return external_id
    assigned = db.execute(insert(AssemblyRow).values(**values).returning(AssemblyRow.id))
    row_id = assigned.scalar_one()
    external_id = derive_id(row_id)
    db.execute(update(AssemblyRow).where(AssemblyRow.id == row_id).values(external_id=external_id))
    return external_id


def store_now(db: Session, assembly: NewAssembly, *, slot: AssemblySlot) -> str:
    """Store `assembly` in the caller's transaction (which the caller commits); its id."""
    return store_assembly(
        db, assembly, row_id=slot.row_id, derive_id=_assembly_id_deriver(assembly.tenant_id)
    )


def store_or_defer(
    db: Session,
    assembly: NewAssembly,
    *,
    slot: AssemblySlot,
    session_factory: sessionmaker[Session],
) -> tuple[str, Callable[[], None] | None]:
    """Commit `db` and return the assembly's id, with the write still to do after answering
    when its id was known up front (PostgreSQL), else None (stored and committed now)."""
    if slot.row_id is None:
        assembly_id = store_now(db, assembly, slot=slot)
        db.commit()
        return assembly_id, None
    db.commit()
    derive = _assembly_id_deriver(assembly.tenant_id)
    write = functools.partial(
        store_after_answer, session_factory, assembly, row_id=slot.row_id, derive=derive
    )
    return derive(slot.row_id), write


def store_after_answer(
    session_factory: sessionmaker[Session],
    assembly: NewAssembly,
    *,
    row_id: int,
    derive: Callable[[int], str],
) -> None:
    """Write a plan whose id was already handed out. A failure is logged and counted, never
    retried: the caller has its answer."""
    started = time.perf_counter()
    try:
        with session_factory() as db:
            store_assembly(db, assembly, row_id=row_id, derive_id=derive)
            db.commit()
    except SQLAlchemyError:
        PLAN_STORE_FAILURES.inc()
        log.exception("assembly %s was answered but could not be stored", derive(row_id))
        return
    PLAN_STORE_LATENCY.observe(time.perf_counter() - started)


def get_assembly(db: Session, *, tenant_id: int, external_id: str) -> AssemblyRow:
    row = db.scalar(
        select(AssemblyRow).where(
            AssemblyRow.tenant_id == tenant_id, AssemblyRow.external_id == external_id
        )
    )
    if row is None:
        raise NotFound(f"assembly {external_id!r} not found")
    return row


def prune_assemblies(db: Session, *, older_than: datetime, keep_per_session: int) -> int:
    """Delete stored assemblies older than `older_than` or beyond the newest `keep_per_session`
    of their session. Facts are never touched. Returns the number deleted."""
    ranked = select(
        AssemblyRow.id,
        func.row_number()
        .over(
            partition_by=(AssemblyRow.tenant_id, AssemblyRow.session_id),
            order_by=AssemblyRow.id.desc(),
        )
        .label("rank"),
    ).subquery()
    excess = select(ranked.c.id).where(ranked.c.rank > keep_per_session)
    result = db.execute(
        delete(AssemblyRow).where(
            (AssemblyRow.created_at < older_than) | AssemblyRow.id.in_(excess)
        )
    )
    return int(getattr(result, "rowcount", 0) or 0)
