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
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.metrics import AFTER_ANSWER_FAILURES, record_checkpoint
from app.storage import checkpoints, folds
from app.storage.session_rows import SessionSnapshot
from app.storage.tables import SessionRow

__all__ = ["checkpoint_if_due"]

log = logging.getLogger("contextd")


def checkpoint_if_due(
    db: Session, session: SessionRow | SessionSnapshot, *, every: int, now: datetime
) -> None:
    """Writes the session's checkpoint, made `now`, when this process's newest fold of it is
    `every` facts or more past the last one, or the last one was refused (0: never). Closes
    `db`; a failure is logged and counted, never raised (the caller has its answer)."""
    if every <= 0:
        return
    started = time.perf_counter()
    try:
        with db:
            fold = folds.newest_fold(db, session)
            if fold is None or fold.logged_length < every:
                return
            known = checkpoints.checkpointed_seq(db, session)
            if known != checkpoints.REFUSED and fold.last_seq - known < every:
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
