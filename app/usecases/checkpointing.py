"""Writing a session's checkpoint (`app.storage.checkpoints`) after an assembly's answer: a new
link once its log has grown by `checkpoint_every_facts` since the last one, so that a worker
new to the session reads at most that many facts beyond it, whatever the log's length.

What a link costs is spent after the answer. A delta against the previous link costs what
changed since (the columns' new tails); every `MAX_LINKS` links one is written whole, derived
from this process's newest fold of the session (its columns, not its items' text), which grows
with the log's length: spread over the facts between whole links, a constant per fact
(`docs/performance.md`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.metrics import AFTER_ANSWER_FAILURES, record_checkpoint_written
from app.storage import checkpoints, folds
from app.storage.caches import Keyed

__all__ = ["checkpoint_if_due", "checkpoint_kept_folds"]

log = logging.getLogger("contextd")


def checkpoint_if_due(
    db: Session,
    session: Keyed,
    *,
    every: int,
    from_facts: int,
    now: datetime,
    minimum: int | None = None,
) -> None:
    """Writes the session's next checkpoint link, made `now`, when this process's newest fold
    of it holds `from_facts` model-visible facts or more and is `every` facts or more past the
    last link (`minimum` facts, when given), or the last one was refused (`every` 0: never).
    Closes `db`; a failure is logged and counted, never raised (the caller has its answer)."""
    if every <= 0:
        return
    started = time.perf_counter()
    try:
        with db:
            fold = folds.newest_fold(db, session)
            if fold is None or fold.logged_length < from_facts:
                return
            known = checkpoints.checkpointed_seq(db, session)
            if known != checkpoints.REFUSED and fold.last_seq - known < (minimum or every):
                return
            link = checkpoints.write_checkpoint(
                db,
                session_pk=session.id,
                fold=fold,
                now=now,
                replace=known == checkpoints.REFUSED,
            )
            if link is None:
                return
            db.commit()
            checkpoints.keep_link(fold, link)
            checkpoints.remember_checkpoint(db, session, fold.last_seq)
        form = "delta" if link.deltas else "whole"
        record_checkpoint_written(form, time.perf_counter() - started)
    except SQLAlchemyError:
        AFTER_ANSWER_FAILURES.labels("checkpoint").inc()
        log.exception("session #%s: its checkpoint could not be written", session.id)


def checkpoint_kept_folds(
    sessions: Callable[[], Session],
    *,
    every: int,
    from_facts: int,
    now: datetime,
    seconds: float,
) -> int:
    """At shutdown: a checkpoint link of every session this process keeps a fold of that has
    grown since its last one, newest read first, for `seconds` at most; how many were written.
    The process that serves a session next, after a restart, then reads no fact but those
    appended since. (A process that stops without this, or a replica serving the session
    meanwhile, folds at most `every` facts beyond the last link.)"""
    if every <= 0:
        return 0
    deadline = time.perf_counter() + seconds
    with sessions() as db:
        kept = folds.kept_folds(db)
    written = 0
    for key, fold in kept:
        if time.perf_counter() > deadline:
            break
        if fold.logged_length < from_facts:
            continue
        with sessions() as db:
            before = checkpoints.checkpointed_seq(db, key)
        if before != checkpoints.REFUSED and before >= fold.last_seq:
            continue
        checkpoint_if_due(sessions(), key, every=every, from_facts=from_facts, now=now, minimum=1)
        written += 1
    return written
