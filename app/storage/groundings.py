"""Next-action groundings stored on plans: which assembly is still to grade, writing its grade
once, reading the grades back.

An assembly is graded against the model output that followed it, once: only the latest
assembly of a lineage (tenant, session, unit), only a session-mode one (it has an `as_of_seq`),
and only while its `grounding` is NULL (`record_grounding` writes it only then, so two processes
grading the same assembly store one grade). `ungraded_as_of_seq` is that rule as an SQL
expression, so that an append can ask it in its own statement (`appends.append_to_session`)
and `latest_ungraded` reads the same assembly it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, case, select, update
from sqlalchemy.orm import Session

from app.domain.errors import StoredPlanMismatch
from app.storage import plans
from app.storage.tables import LINEAGE_SESSION, LINEAGE_UNIT, AssemblyRow


@dataclass(frozen=True)
class UngradedAssembly:
    """A lineage's latest session-mode assembly, not yet graded against its next action."""

    row_id: int
    as_of_seq: int
    response: dict[str, Any]
    request: str
    """The request as received (JSON text): the candidates a stored answer's items name."""


def _latest_of_lineage(
    tenant_id: ColumnElement[int] | int,
    session_pk: ColumnElement[int] | int,
    unit: ColumnElement[str] | str,
) -> tuple[ColumnElement[bool], ...]:
    # The index expressions on the left: their `==` builds the SQL comparison for any operand.
    return (
        AssemblyRow.tenant_id == tenant_id,
        LINEAGE_SESSION == session_pk,  # noqa: SIM300
        LINEAGE_UNIT == unit,  # noqa: SIM300
    )


def ungraded_as_of_seq(
    tenant_id: ColumnElement[int] | int,
    session_pk: ColumnElement[int] | int,
    unit: ColumnElement[str] | str,
) -> ScalarSelect[Any]:
    """The `as_of_seq` of the lineage's latest assembly when it is a session-mode one still
    ungraded, else NULL: one backward step in the lineage index. `unit` is the lineage's key
    ('' for none)."""
    return (
        select(case((AssemblyRow.grounding.is_(None), AssemblyRow.as_of_seq)))
        .where(*_latest_of_lineage(tenant_id, session_pk, unit))
        .order_by(AssemblyRow.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def latest_ungraded(
    db: Session, *, tenant_id: int, session_pk: int, unit: str | None
) -> UngradedAssembly | None:
    """The latest stored assembly of the lineage (tenant, session, unit), when it is a
    session-mode one that has no grounding yet; else None."""
    row = db.execute(
        select(
            AssemblyRow.id,
            AssemblyRow.as_of_seq,
            AssemblyRow.response,
            AssemblyRow.fingerprints,
            AssemblyRow.base_id,
            AssemblyRow.request,
            AssemblyRow.grounding,
        )
        .where(*_latest_of_lineage(tenant_id, session_pk, unit or ""))
        .order_by(AssemblyRow.id.desc())
        .limit(1)
    ).one_or_none()
    if row is None or row.as_of_seq is None or row.grounding is not None:
        return None
    try:
        response, _ = plans.whole(
            db,
            session_key=session_pk,
            base_id=row.base_id,
            response=row.response,
            fingerprints=row.fingerprints,
        )
    except StoredPlanMismatch:
        return None  # what it showed can no longer be read
    return UngradedAssembly(
        row_id=row.id, as_of_seq=row.as_of_seq, response=response, request=row.request
    )


def record_grounding(
    db: Session, *, session_pk: int, row_id: int, grounding: dict[str, Any]
) -> bool:
    """Store an assembly of session `session_pk` its grounding, once: False when it already had
    one (another process graded it first). The session key routes the update to its shard."""
    result = db.execute(
        update(AssemblyRow)
        .where(
            AssemblyRow.session_key == session_pk,
            AssemblyRow.id == row_id,
            AssemblyRow.grounding.is_(None),
        )
        .values(grounding=grounding)
    )
    return bool(getattr(result, "rowcount", 0))


def recent_groundings(
    db: Session, *, tenant_id: int, session_pk: int, limit: int
) -> list[dict[str, Any]]:
    """The groundings of the session's latest `limit` graded assemblies, newest first."""
    return list(
        db.scalars(
            select(AssemblyRow.grounding)
            .where(
                AssemblyRow.tenant_id == tenant_id,
                LINEAGE_SESSION == session_pk,  # noqa: SIM300
                AssemblyRow.grounding.is_not(None),
            )
            .order_by(AssemblyRow.id.desc())
            .limit(limit)
        )
    )
