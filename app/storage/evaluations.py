"""Evaluations run as jobs: one row each, updated as the job moves on (`EvaluationRow`).

Every read names the tenant: another tenant's job is not found. A job's runner writes its
progress, which also says it is alive (`updated_at`), and reads back whether it was cancelled.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.domain.errors import NotFound
from app.storage.tables import EvaluationRow

__all__ = ["cancel", "finish", "get", "progress", "prune", "start"]

RUNNING = "running"


def get(db: Session, *, tenant_id: int, evaluation_id: str) -> EvaluationRow:
    row = db.get(EvaluationRow, evaluation_id)
    if row is None or row.tenant_id != tenant_id:
        raise NotFound(
            f"no evaluation {evaluation_id!r}: a job lives while the service that runs it does,"
            " and its row says where it stood; start it again with POST"
            " /sessions/{id}/evaluate"
        )
    return row


def start(
    db: Session,
    *,
    evaluation_id: str,
    tenant_id: int,
    session_id: str,
    calls_total: int,
    now: datetime,
) -> EvaluationRow:
    """The job's row, written anew as running from the start (a job asked again after it
    failed, was cancelled or was lost is run again under its id)."""
    row = db.get(EvaluationRow, evaluation_id)
    if row is None:
        row = EvaluationRow(id=evaluation_id, tenant_id=tenant_id, created_at=now)
        db.add(row)
    row.session_id, row.status = session_id, RUNNING
    row.calls_done, row.calls_total = 0, calls_total
    row.result = row.error = None
    row.updated_at = now
    db.flush()
    return row


def progress(db: Session, *, evaluation_id: str, calls_done: int, now: datetime) -> str:
    """Records a running job's progress (and that its runner is alive); the job's status,
    which a cancellation may have changed."""
    db.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id, EvaluationRow.status == RUNNING)
        .values(calls_done=calls_done, updated_at=now)
    )
    status: str = db.scalars(
        select(EvaluationRow.status).where(EvaluationRow.id == evaluation_id)
    ).one()
    return status


def finish(
    db: Session,
    *,
    evaluation_id: str,
    status: str,
    now: datetime,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """Ends a running job as `status`, with its answer or what went wrong; a job no longer
    running (cancelled meanwhile) is left as it is."""
    values: dict[str, Any] = {"status": status, "updated_at": now, "error": error}
    if result is not None:
        values["result"] = result
        values["calls_done"] = EvaluationRow.calls_total
    db.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id, EvaluationRow.status == RUNNING)
        .values(**values)
    )


def cancel(db: Session, *, tenant_id: int, evaluation_id: str, now: datetime) -> EvaluationRow:
    """Cancels the tenant's job if it is running (its runner stops at its next call); the row
    either way."""
    row = get(db, tenant_id=tenant_id, evaluation_id=evaluation_id)
    if row.status == RUNNING:
        row.status, row.updated_at = "cancelled", now
        db.flush()
    return row


def prune(db: Session, *, older_than: datetime, limit: int) -> int:
    """Deletes up to `limit` jobs whose row has not moved since `older_than` (done, failed,
    cancelled, or lost long ago); how many it deleted."""
    stale = (
        select(EvaluationRow.id)
        .where(EvaluationRow.updated_at < older_than)
        .order_by(EvaluationRow.updated_at)
        .limit(limit)
    )
    ids = list(db.scalars(stale))
    if ids:
        db.execute(delete(EvaluationRow).where(EvaluationRow.id.in_(ids)))
    return len(ids)
