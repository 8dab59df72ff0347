"""Writing a session's checkpoint (`app.storage.checkpoints`) after an assembly's answer, once
its log has grown by `checkpoint_every_facts` since the last one: a worker new to the session
then reads at most that many facts beyond the checkpoint, whatever the log's length.

What it costs is spent after the answer, once per `checkpoint_every_facts` facts: the body is
derived from this process's newest fold of the session (its columns, not its items' text), so
it grows with the log's length; spread over the facts that made it due, it is a constant per
fact (`docs/performance.md`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.metrics import AFTER_ANSWER_FAILURES, record_checkpoint
from app.storage import checkpoints, folds
from app.storage.caches import Keyed

__all__ = ["checkpoint_if_due", "checkpoint_kept_folds"]

log = logging.getLogger("contextd")


def checkpoint_if_due(
    db: Session,
    session: Keyed,
    *,
    every: int,
    now: datetime,
    minimum: int | None = None,
) -> None:
    """Writes the session's checkpoint, made `now`, when this process's newest fold of it is
    `every` facts or more past the last one (`minimum` facts, when given), or the last one was
    refused (`every` 0: never). Closes `db`; a failure is logged and counted, never raised (the
    caller has its answer)."""
    if every <= 0:
        return
    started = time.perf_counter()
    try:
        with db:
            fold = folds.newest_fold(db, session)
            if fold is None or fold.logged_length < every:
                return
            known = checkpoints.checkpointed_seq(db, session)
            if known != checkpoints.REFUSED and fold.last_seq - known < (minimum or every):
                return
            written = checkpoints.write_checkpoint(
                db,
                session_pk=session.id,
                fold=fold,
                now=now,
                replace=known == checkpoints.REFUSED,
            )
            if written is None:
                return
            db.commit()
            checkpoints.remember_checkpoint(db, session, fold.last_seq)
        record_checkpoint("written", time.perf_counter() - started)
    except SQLAlchemyError:
        AFTER_ANSWER_FAILURES.labels("checkpoint").inc()
        log.exception("session #%s: its checkpoint could not be written", session.id)


def checkpoint_kept_folds(
    sessions: Callable[[], Session], *, every: int, now: datetime, seconds: float
) -> int:
    """At shutdown: the checkpoint of every session this process keeps a fold of that has
    grown since its last one, newest read first, for `seconds` at most; how many were written.
    The process that serves a session next, after a restart, then reads no fact but those
    appended since. (A process that stops without this, or a replica serving the session
    meanwhile, folds at most `every` facts beyond the last checkpoint.)"""
    if every <= 0:
        return 0
    deadline = time.perf_counter() + seconds
    with sessions() as db:
        kept = folds.kept_folds(db)
    written = 0
    for key, fold in kept:
        if time.perf_counter() > deadline:
            break
        if fold.logged_length < every:
            continue
        with sessions() as db:
            before = checkpoints.checkpointed_seq(db, key)
        if before != checkpoints.REFUSED and before >= fold.last_seq:
            continue
        checkpoint_if_due(sessions(), key, every=every, now=now, minimum=1)
        written += 1
    return written
