"""Evaluations too long to answer at once, run as jobs: `POST /sessions/{id}/evaluate` answers
202 with `Location: /evaluations/{id}`, `GET` on it tells where the job stands, `DELETE`
cancels it.

An evaluation is a job when it would replay more than `CTX_EVALUATE_SYNC_CALLS` calls, or when
the request says `Prefer: respond-async` (RFC 7240). The job runs on one of this process's
runner threads (`EvaluationRunner`, `CTX_EVALUATE_JOB_WORKERS`); its row (`app.storage.
evaluations`) holds its state, so any process of the service answers for it:

- its id is derived from the tenant, the session, the log's last seq and the request, so the
  same evaluation asked again while it runs, or once it is done, is the same job;
- its runner writes its progress (calls done of calls total) at most every
  `CTX_EVALUATE_PROGRESS_SECONDS`, and reads back whether it was cancelled, then stops at the
  call it is on;
- it survives the client's leaving, counts against the tenant's evaluations under way
  (`CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT`) until it ends, and is lost with its process: a
  running job whose progress has not moved for `CTX_EVALUATE_LOST_AFTER_SECONDS` is answered
  `failed`, saying it was lost, never as still running.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.clock import Clock, seconds_between
from app.contract.evaluation import EvaluateRequest
from app.domain.ids import derive_id
from app.domain.json_encoding import encode_json
from app.settings import Settings
from app.storage import evaluations
from app.storage.tables import EvaluationRow
from app.usecases.evaluate import Prepared, evaluating, prepare, run, tenant_busy

__all__ = ["EvaluationRunner", "cancel", "job", "start_or_run"]

log = logging.getLogger(__name__)

LOST = (
    "lost: the process running it stopped (a restart, or a crash) before it finished, and"
    " nothing runs it now; evaluate again"
)


class _Cancelled(Exception):
    """The job's row says it was cancelled."""


class _Stopping(Exception):
    """The service is stopping."""


class EvaluationRunner:
    """This process's evaluation jobs: a few runner threads, stopped with the service."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._settings, self._sessions, self._clock = settings, sessions, clock
        self._pool = ThreadPoolExecutor(
            max_workers=settings.evaluate_job_workers, thread_name_prefix="evaluation"
        )
        self._stopping = threading.Event()

    def submit(self, prepared: Prepared, *, tenant_id: int, evaluation_id: str) -> None:
        """Runs the job, which holds one of the tenant's evaluation slots until it ends."""
        self._pool.submit(self._run, prepared, tenant_id=tenant_id, evaluation_id=evaluation_id)

    def close(self) -> None:
        """Stops every job at its next call (each is then `failed`, saying so)."""
        self._stopping.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, prepared: Prepared, *, tenant_id: int, evaluation_id: str) -> None:
        written = float("-inf")

        def progress(done: int) -> None:
            nonlocal written
            if self._stopping.is_set():
                raise _Stopping
            due = time.monotonic() - written >= self._settings.evaluate_progress_seconds
            if not due and done < prepared.calls_total:
                return
            written = time.monotonic()
            with self._sessions() as db:
                status = evaluations.progress(
                    db, evaluation_id=evaluation_id, calls_done=done, now=self._clock()
                )
                db.commit()
            if status != evaluations.RUNNING:
                raise _Cancelled

        outcome: dict[str, Any]
        try:
            outcome = {"status": "done", "result": run(prepared, self._settings, progress=progress)}
        except _Cancelled:
            return
        except _Stopping:
            outcome = {"status": "failed", "error": "the service stopped before it finished"}
        except Exception as exc:  # the job fails, saying so; the service goes on
            log.exception("evaluation %s failed", evaluation_id)
            outcome = {"status": "failed", "error": f"the replay failed: {type(exc).__name__}"}
        finally:
            evaluating.give_back(tenant_id)
        with self._sessions() as db:
            evaluations.finish(db, evaluation_id=evaluation_id, now=self._clock(), **outcome)
            db.commit()


def start_or_run(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    body: EvaluateRequest,
    settings: Settings,
    runner: EvaluationRunner,
    respond_async: bool,
    now: datetime,
) -> tuple[bool, dict[str, Any]]:
    """(True, the evaluation's answer) when it is run now; else (False, the job's state): a
    job started, or the same one already running or done."""
    prepared = prepare(db, tenant_id=tenant_id, session_id=session_id, body=body, settings=settings)
    if not respond_async and prepared.calls_total <= settings.evaluate_sync_calls:
        with evaluating.taken(tenant_id, limit=settings.evaluate_max_concurrent_per_tenant) as ok:
            if not ok:
                raise tenant_busy(settings)
            return True, run(prepared, settings)
    evaluation_id = derive_id(
        "eval",
        tenant_id,
        prepared.session.id,
        prepared.session.last_seq,
        hashlib.sha256(encode_json(body.model_dump(mode="json"))).hexdigest(),
    )
    known = db.get(EvaluationRow, evaluation_id)
    # The same job, running or done, is answered; one failed, cancelled or lost runs again.
    if known is not None and (state := _state(known, settings, now=now))["status"] in (
        "running",
        "done",
    ):
        return False, state
    if not evaluating.take(tenant_id, limit=settings.evaluate_max_concurrent_per_tenant):
        raise tenant_busy(settings)
    try:
        row = evaluations.start(
            db,
            evaluation_id=evaluation_id,
            tenant_id=tenant_id,
            session_id=session_id,
            calls_total=prepared.calls_total,
            now=now,
        )
        db.commit()
        runner.submit(prepared, tenant_id=tenant_id, evaluation_id=evaluation_id)
    except BaseException:
        evaluating.give_back(tenant_id)
        raise
    return False, _state(row, settings, now=now)


def job(
    db: Session, *, tenant_id: int, evaluation_id: str, settings: Settings, now: datetime
) -> dict[str, Any]:
    """`GET /evaluations/{id}`: where the tenant's job stands."""
    row = evaluations.get(db, tenant_id=tenant_id, evaluation_id=evaluation_id)
    return _state(row, settings, now=now)


def cancel(
    db: Session, *, tenant_id: int, evaluation_id: str, settings: Settings, now: datetime
) -> dict[str, Any]:
    """`DELETE /evaluations/{id}`: the tenant's job cancelled if it was running (its runner
    stops at its next call), and where it stands."""
    row = evaluations.cancel(db, tenant_id=tenant_id, evaluation_id=evaluation_id, now=now)
    db.commit()
    return _state(row, settings, now=now)


def _state(row: EvaluationRow, settings: Settings, *, now: datetime) -> dict[str, Any]:
    status, error = row.status, row.error
    if status == evaluations.RUNNING and (
        seconds_between(now, row.updated_at) > settings.evaluate_lost_after_seconds
    ):
        status, error = "failed", LOST
    return {
        "evaluation_id": row.id,
        "session_id": row.session_id,
        "status": status,
        "progress": {"calls_done": row.calls_done, "calls_total": row.calls_total},
        "result": row.result,
        "error": error,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }
