"""A stored assembly's prompt-cache outcome, recorded when its provider usage is reported, and
when its lineage's call before it was made (what an `expired` outcome is judged by)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.storage.plans import StoredAssembly
from app.storage.tables import LINEAGE_SESSION, LINEAGE_UNIT, AssemblyRow

__all__ = ["outcome_of", "previous_call_at", "record_outcome"]


def previous_call_at(db: Session, assembly: StoredAssembly) -> datetime | None:
    """When the assembly before `assembly` in its lineage (tenant, session, unit) was made;
    None when it is the lineage's first, or that one is no longer kept."""
    found: datetime | None = db.scalar(
        select(AssemblyRow.created_at)
        .where(
            AssemblyRow.tenant_id == assembly.tenant_id,
            LINEAGE_SESSION == assembly.session_key,  # noqa: SIM300
            LINEAGE_UNIT == (assembly.unit or ""),  # noqa: SIM300
            AssemblyRow.id < assembly.id,
        )
        .order_by(AssemblyRow.id.desc())
        .limit(1)
    )
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
