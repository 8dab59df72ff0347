"""What this process keeps between requests, all of it derived from the database: the folds of
session logs, the histories recent assemblies showed, and the candidate bodies it knows to be
fresh. Losing any of it costs only time: every entry is re-derived from the log (a fold, a
shown history) or re-read (a body's age) when it is missing.

One `ProcessCaches` per app: `create_app` makes it and hands it to the session factory
(`create_session_factory`), so every database session the app makes reaches it (`caches_of`).
Its lifetime is the app's: a test's app, a scratch store and the CLI each start empty, and
nothing needs resetting between them. A session made another way gets caches of its own, which
end with it.

Not here: the token counts' memo (`app.tokens.token_counter`), a pure function's memo keyed by
the text's digest. Its entries are true in every app, so sharing them across apps costs nothing
and clearing them would change nothing.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from cachetools import LRUCache
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.domain.facts import Fold
from app.domain.items import Item
from app.settings import DEFAULT_FOLD_CACHE_BYTES

__all__ = ["CACHES", "FoldKey", "Keyed", "ProcessCaches", "caches_of", "fold_key"]

CACHES = "contextd.caches"
"""The key of a database session's `info` that holds its app's caches."""

FoldKey = tuple[weakref.ref[Engine], int, datetime]
"""(the engine, held weakly, the session's row id, its creation time): two databases, or a
session created again under a reused id, never share an entry."""


class ProcessCaches:
    """The caches one app holds, each with the lock its readers and writers take."""

    def __init__(
        self, *, fold_bytes: int = DEFAULT_FOLD_CACHE_BYTES, checkpoints: bool = True
    ) -> None:
        self.checkpoints = checkpoints
        """Whether a session this process has no fold of starts from its checkpoint
        (`app.storage.checkpoints`; the setting `checkpoint_every_facts` > 0)."""
        self.folds: LRUCache[FoldKey, Fold] = LRUCache(
            maxsize=fold_bytes, getsizeof=lambda fold: fold.weight + 1
        )
        """Folds by session, bounded by the bytes they hold (`Fold.weight`: their items' JSON
        and the columns kept with them), most recently read first: one session of large tool
        outputs weighs as much as many small ones (`app.storage.folds`)."""
        self.folds_lock = threading.Lock()
        self.checkpointed: LRUCache[FoldKey, int] = LRUCache(maxsize=100_000)
        """The seq of each session's checkpoint as this process last wrote or read it
        (`app.storage.checkpoints`), under `folds_lock`."""
        self.shown: LRUCache[tuple[Any, ...], Sequence[Item]] = LRUCache(maxsize=4_096)
        """The history each recent session-mode assembly showed, by session and seq: its
        plan read back, and the grader of its next action, read it instead of normalizing the
        log again (`app.usecases.plan_record`)."""
        self.shown_lock = threading.Lock()
        self.fresh_bodies: LRUCache[tuple[Any, ...], dict[str, datetime]] = LRUCache(
            maxsize=200_000, getsizeof=len
        )
        """(database, tenant, session key) -> {digest: the row's `created_at`} as this process
        last wrote or read it, 200,000 digests in all (`app.storage.bodies`)."""
        self.fresh_bodies_lock = threading.Lock()


class Keyed(Protocol):
    """What names a session's entries: a session row, a snapshot of one, or its key alone."""

    @property
    def id(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...


def fold_key(db: Session, session: Keyed) -> FoldKey:
    """The key of `session`'s entries (a session row, or a snapshot of one) in `db`'s
    database."""
    return (weakref.ref(db.get_bind().engine), session.id, session.created_at)


def caches_of(db: Session) -> ProcessCaches:
    """The caches of the app whose session factory made `db`; for a session made another way,
    caches of its own."""
    caches = db.info.get(CACHES)
    if caches is None:
        caches = db.info[CACHES] = ProcessCaches()
    return caches
