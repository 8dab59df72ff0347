"""Checkpoints (`app.domain.checkpoint`): each session's latest fold and what is derived from
it, kept in `checkpoints` so that a worker that has no fold of a session (after a restart, or
on another replica) reads the checkpoint and the facts after it instead of the whole log, and
then reads a fact's item only when something reads it.

A checkpoint is derived data, and nothing here trusts it. Before it is restored:

- its body must hash to the `body_digest` written beside it (a corrupt body is refused);
- it must have been derived by this code (`DERIVATION`, the digest of the functional core's
  source and the body's format): a checkpoint another version derived is derived again;
- the log must still hold, at the checkpoint's seq, the very fact it was derived up to
  (`log_digest`): the log is append-only, so the facts before it are those it was derived from.

A checkpoint refused, or one that fails to restore, is reported to the caller and the fold is
derived from the log instead; it is never served. The next write replaces it.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import zstandard
from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

import app.domain
from app.domain.checkpoint import CHECKPOINT_FORMAT, checkpoint_of, restored
from app.domain.column_codec import decoded, encoded
from app.domain.facts import Fold
from app.domain.facts.stored_items import ItemStore, StoredFact
from app.storage import fact_log
from app.storage.caches import Keyed, caches_of, fold_key
from app.storage.tables import CheckpointRow, Fact

__all__ = [
    "DERIVATION",
    "REFUSED",
    "Restored",
    "checkpointed_seq",
    "reading_with",
    "remember_checkpoint",
    "restore",
    "write_checkpoint",
]


log = logging.getLogger("contextd")


def _derivation() -> str:
    """The digest of the code a checkpoint's body is derived by: every module of the functional
    core, and the body's format."""
    digest = hashlib.sha256(f"format {CHECKPOINT_FORMAT}\n".encode())
    root = Path(app.domain.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\n" + path.read_bytes())
    return digest.hexdigest()


DERIVATION = _derivation()

_LEVEL = 3
"""zstd's level for a body: a tenth of the bytes, in about 2 ms per MB either way."""


@dataclass(frozen=True)
class Restored:
    """What a restore found: the fold (None when there was none to use), and why a checkpoint
    that was there was not used (None when it was, or when there was none)."""

    fold: Fold | None
    refused: str | None = None


def _log_digest(seq: int, kind: str, tokens: int, item: Any) -> str:
    encoded = orjson.dumps([seq, kind, tokens, item], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(encoded).hexdigest()


def restore(db: Session, *, session_pk: int, up_to_seq: int) -> Restored:
    """The session's checkpoint, checked and restored, when it is of a seq up to `up_to_seq`
    (see the module docstring)."""
    row = db.execute(
        select(CheckpointRow).where(
            CheckpointRow.session_id == session_pk, CheckpointRow.last_seq <= up_to_seq
        )
    ).scalar_one_or_none()
    if row is None:
        return Restored(None)
    if row.derivation != DERIVATION:
        return Restored(None, "derived_by_other_code")
    if hashlib.sha256(row.body).hexdigest() != row.body_digest:
        return Restored(None, "corrupt")
    fact = fact_log.get_fact(db, session_id=session_pk, seq=row.last_seq)
    if fact is None or _log_digest(fact.seq, fact.type, fact.tokens, fact.item) != row.log_digest:
        return Restored(None, "log_changed")
    try:
        record = decoded(zstandard.ZstdDecompressor().decompress(row.body))
        store = ItemStore(
            _reader(db.get_bind().engine, session_pk),
            record["logged"]["order"],
            lock=threading.Lock(),
        )
        fold = restored(record, store)
    except (ValueError, KeyError, TypeError, IndexError, zstandard.ZstdError):
        log.warning("session #%s: its checkpoint at seq %s is malformed", session_pk, row.last_seq)
        return Restored(None, "malformed")
    if fold.last_seq != row.last_seq:
        return Restored(None, "malformed")
    return Restored(fold)


REFUSED = -1
"""`checkpointed_seq` of a session whose checkpoint this process refused: the next write
replaces it, whatever its seq."""


def checkpointed_seq(db: Session, session: Keyed) -> int:
    """The seq of the session's checkpoint (0: none; `REFUSED`), as this process last wrote or
    read it."""
    key = fold_key(db, session)
    caches = caches_of(db)
    with caches.folds_lock:
        known = caches.checkpointed.get(key)
    if known is None:
        known = (
            db.execute(
                select(CheckpointRow.last_seq).where(CheckpointRow.session_id == session.id)
            ).scalar_one_or_none()
            or 0
        )
        remember_checkpoint(db, session, known)
    return known


def remember_checkpoint(db: Session, session: Keyed, seq: int) -> None:
    """Notes that the session's checkpoint is at `seq` (written and committed, or read)."""
    caches = caches_of(db)
    with caches.folds_lock:
        caches.checkpointed[fold_key(db, session)] = seq


def write_checkpoint(
    db: Session, *, session_pk: int, fold: Fold, now: datetime, replace: bool = False
) -> int | None:
    """Writes `fold` as the session's checkpoint unless one of a later seq is there already
    (another worker's), or whatever is there with `replace` (a checkpoint refused); the body's
    bytes, or None when the log lacks the fold's last fact (a fold of nothing). Does not
    commit."""
    fact = fact_log.get_fact(db, session_id=session_pk, seq=fold.last_seq)
    if fact is None:
        return None
    body = zstandard.ZstdCompressor(level=_LEVEL).compress(encoded(checkpoint_of(fold)))
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    values = {
        "session_id": session_pk,
        "last_seq": fold.last_seq,
        "derivation": DERIVATION,
        "log_digest": _log_digest(fact.seq, fact.type, fact.tokens, fact.item),
        "body_digest": hashlib.sha256(body).hexdigest(),
        "body": body,
        "created_at": now,
    }
    statement = dialect.insert(CheckpointRow).values(values)
    db.execute(
        statement.on_conflict_do_update(
            index_elements=["session_id"],
            set_={name: statement.excluded[name] for name in values if name != "session_id"},
            where=None if replace else CheckpointRow.last_seq < statement.excluded.last_seq,
        )
    )
    return len(body)


_LISTED_SEQS = 1_000
"""Up to this many seqs are read by list; more, by the range they span."""

_reading: contextvars.ContextVar[tuple[Session, int] | None] = contextvars.ContextVar(
    "contextd_checkpoint_reading", default=None
)


def reading_with(db: Session) -> None:
    """Items a restored fold reads from now on in this context (this request, on this thread)
    are read on `db`'s transaction, not on a connection of their own."""
    _reading.set((db, threading.get_ident()))


def _reader(engine: Engine, session_pk: int) -> Callable[[Sequence[int]], Mapping[int, StoredFact]]:
    """Reads the session's facts by seq: on the database session the current request reads
    with (`reading_with`), else on a connection of the engine's, held for the read only."""
    facts = Fact.__table__
    # Never a closure over a request's session, nor a strong reference to the engine: the fold
    # outlives the request, and must not keep its app's engine alive.
    engine_ref = weakref.ref(engine)

    def read(seqs: Sequence[int]) -> dict[int, StoredFact]:
        engine = engine_ref()
        if engine is None:
            raise LookupError("the database this fold was restored from is gone")
        wanted = set(seqs)
        query = select(facts.c.seq, facts.c.item, facts.c.provenance).where(
            facts.c.session_id == session_pk
        )
        # Many seqs: one range (on the primary key) rather than a list of thousands.
        if len(wanted) > _LISTED_SEQS:
            query = query.where(facts.c.seq.between(min(wanted), max(wanted)))
        else:
            query = query.where(facts.c.seq.in_(sorted(wanted)))
        current = _reading.get()
        if (
            current is not None
            and current[1] == threading.get_ident()
            and current[0].get_bind().engine is engine
        ):
            rows = current[0].execute(query).all()
        else:
            with engine.connect() as connection:
                rows = list(connection.execute(query))
        return {row.seq: (row.item, row.provenance) for row in rows if row.seq in wanted}

    return read
