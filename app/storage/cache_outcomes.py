"""A stored assembly's prompt-cache outcome, recorded when its provider usage is reported, and
when its lineage's call before it was made (what an `expired` outcome is judged by) or its
newest call (what the compaction advice prices the cache by)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from app.storage.plans import StoredAssembly
from app.storage.tables import (
    LINEAGE_SESSION,
    LINEAGE_UNIT,
    AssemblyRow,
    previous_call_filter,
)

__all__ = ["last_call_at", "outcome_of", "previous_call_at", "record_outcome"]


def previous_call_at(db: Session, assembly: StoredAssembly) -> datetime | None:
    """When the lineage's (tenant, session, unit) call before `assembly` was made: its newest
    assembly before it that it did not supersede (`previous_call_filter`); None when it is the
    lineage's first, or that one is no longer kept."""
    return _latest_at(
        db,
        tenant_id=assembly.tenant_id,
        session_key=assembly.session_key,
        unit=assembly.unit or "",
        before_id=assembly.id,
        called=None
        if assembly.session_id is None
        else previous_call_filter(
            assembly.session_id, last_seq=assembly.as_of_seq, up_to_seq=assembly.as_of_seq
        ),
    )


def last_call_at(db: Session, *, tenant_id: int, session_key: int, unit: str) -> datetime | None:
    """When the newest assembly kept of the lineage (tenant, session, unit) was made."""
    return _latest_at(db, tenant_id=tenant_id, session_key=session_key, unit=unit)


def _latest_at(
    db: Session,
    *,
    tenant_id: int,
    session_key: int,
    unit: str,
    before_id: int | None = None,
    called: ColumnElement[bool] | None = None,
) -> datetime | None:
    query = select(AssemblyRow.created_at).where(
        AssemblyRow.tenant_id == tenant_id,
        LINEAGE_SESSION == session_key,  # noqa: SIM300
        LINEAGE_UNIT == unit,  # noqa: SIM300
    )
    if before_id is not None:
        query = query.where(AssemblyRow.id < before_id)
    if called is not None:
        query = query.where(called)
    found: datetime | None = db.scalar(query.order_by(AssemblyRow.id.desc()).limit(1))
    return found


def record_outcome(db: Session, assembly: StoredAssembly, outcome: str) -> None:
    """Store `outcome` on the assembly (the latest usage report's, for a call reported again).
    The session key routes the update to its shard."""
    db.execute(
        update(AssemblyRow)
        .where(AssemblyRow.session_key == assembly.session_key, AssemblyRow.id == assembly.id)
        .values(cache_outcome=outcome)
    )


def outcome_of(db: Session, assembly: StoredAssembly) -> str | None:
    outcome: str | None = db.scalar(
        select(AssemblyRow.cache_outcome).where(
            AssemblyRow.session_key == assembly.session_key, AssemblyRow.id == assembly.id
        )
    )
    return outcome
