"""A session's active history, read from its log (read the new facts → fold), and the fold
cache behind it (the app's, `app.storage.caches`). Normalizing and counting it is the use
cases' business (`app.usecases.loaded_history`).

The fold cache keeps read-your-writes: the log is append-only, so a fold up to seq n never
changes, and a read always folds every fact up to the session row's `last_seq` (or the
requested seq) onto the newest cached fold that does not go past it. Keys carry the engine and
the session's creation time, so two databases never share an entry. An evicted fold costs only
time: the next read folds the log again. Pinned by `tests/api/test_projection_cache.py`
(incremental reads equal a fold from scratch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple, cast

from sqlalchemy.orm import Session

from app.domain.facts import EMPTY_FOLD, ActiveHistory, Fold, LoggedFact, fold_facts, fork_fold
from app.storage import checkpoints, fact_log, session_rows
from app.storage.caches import Keyed, caches_of, fold_key
from app.storage.session_rows import SessionSnapshot
from app.storage.tables import SessionRow


def fold_session(
    db: Session,
    session: SessionRow | SessionSnapshot,
    *,
    up_to_seq: int | None = None,
    on_checkpoint: Callable[[str], None] | None = None,
) -> ActiveHistory:
    """The session's active history (as it was at `up_to_seq`, when given), folding only the
    facts appended since this process's newest fold of it, or, where this process has none it
    can start from, since the session's checkpoint (`app.storage.checkpoints`: `on_checkpoint`
    is told `restored`, or `refused_<why>` and the log is folded instead). A fork's fold
    starts from its parent's active history as of the fork point (read from the parent's log,
    not copied)."""
    target = session.last_seq if up_to_seq is None else min(up_to_seq, session.last_seq)
    caches = caches_of(db)
    checkpoints.reading_with(db)
    key = fold_key(db, session)
    with caches.folds_lock:
        cached = caches.folds.get(key)
    restored = (
        None
        if (cached is not None and cached.last_seq <= target) or not caches.checkpoints
        else checkpoints.restore(db, session_pk=session.id, up_to_seq=target)
    )
    if restored is not None and restored.refused is not None:
        checkpoints.remember_checkpoint(db, session, checkpoints.REFUSED)
    if restored is not None and on_checkpoint is not None:
        if restored.refused is not None:
            on_checkpoint(f"refused_{restored.refused}")
        elif restored.fold is not None:
            on_checkpoint("restored")
    if cached is not None and cached.last_seq <= target:
        start = cached
    elif restored is not None and restored.fold is not None:
        start = restored.fold
    elif session.kind == "fork" and session.parent_id is not None:
        parent = session_rows.get_session_by_pk(db, session.parent_id)
        start = fork_fold(
            fold_session(db, parent, up_to_seq=session.fork_seq), inherit=session.inherit
        )
    else:
        start = EMPTY_FOLD
    if start.last_seq == target:
        fold = start  # nothing was appended since the cached fold
    else:
        facts = fact_log.read_facts(
            db, session_id=session.id, after_seq=start.last_seq, up_to_seq=target
        )
        # Rows carry every column the fold reads, by name.
        fold = fold_facts(start, cast(Sequence[LoggedFact], facts), last_seq=target)
    if fold is not cached:
        with caches.folds_lock:
            newest = caches.folds.get(key)
            # The newest fold is kept, whoever asked for it: a fold up to an earlier seq (a
            # grader's, say) that extended the shared columns leaves the next fold to extend
            # them in place only if it starts from it. A fold larger than the whole cache is
            # served, not kept.
            if newest is None or newest.last_seq < fold.last_seq:
                if fold.weight < caches.folds.maxsize:
                    caches.folds[key] = fold
                else:
                    caches.folds.pop(key, None)
    return ActiveHistory.of(
        fold,
        session_pk=session.id,
        encoding=session.encoding,
        context_window=session.context_window,
        unit=session.unit,
    )


def newest_fold(db: Session, session: Keyed) -> Fold | None:
    """This process's newest fold of the session, if it keeps one."""
    caches = caches_of(db)
    with caches.folds_lock:
        return caches.folds.get(fold_key(db, session))


def kept_folds(db: Session) -> list[tuple[SessionKey, Fold]]:
    """The folds this process keeps of sessions of `db`'s database, newest read first, each
    with its session's (row id, creation time)."""
    caches, engine = caches_of(db), db.get_bind().engine
    with caches.folds_lock:
        kept = list(caches.folds.items())
    return [
        (SessionKey(pk, created_at), fold)
        for (ref, pk, created_at), fold in kept
        if ref() is engine
    ]


class SessionKey(NamedTuple):
    """What names a session's entries in this process's caches (`fold_key`)."""

    id: int
    created_at: datetime
