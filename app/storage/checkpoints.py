"""Checkpoints (`app.domain.checkpoint`): each session's fold and what is derived from it,
kept in `checkpoints` so that a worker that has no fold of a session (after a restart, or on
another replica) reads the checkpoint and the facts after it instead of the whole log, and then
reads a fact's item only when something reads it.

A session's checkpoint is a chain of links, one row each: a link written whole, then links
written as deltas against the one before (`app.domain.record_delta`), so that a write costs
what changed since the last one and links can be written every few dozen facts. Every
`MAX_LINKS` deltas (or once they weigh half the whole link) the next link is written whole, and
the older links go.

A checkpoint is derived data, and nothing here trusts it. Before one is restored:

- it must have been derived by this code (`DERIVATION`, the digest of the functional core's
  source and the body's format): a checkpoint another version derived is derived again;
- each link of its chain must be the one its successor names (by seq and body digest), back
  to a whole link, and each body must hash to the digest written beside it;
- the log must still hold, at the newest link's seq, the very fact it was derived up to
  (`log_digest`): the log is append-only, so the facts before it are those it was derived from.

A checkpoint refused, or one that fails to restore, is reported to the caller and the fold is
derived from the log instead; it is never served. The next write replaces it with a whole link.
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
from typing import Any, cast

import orjson
import zstandard
from sqlalchemy import Engine, Row, delete, exists, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

import app.domain
from app.domain.checkpoint import CHECKPOINT_FORMAT, checkpoint_of, restored
from app.domain.column_codec import decoded, encoded
from app.domain.facts import Fold
from app.domain.facts.columns import LoggedUpTo
from app.domain.facts.stored_items import ItemStore, StoredFact
from app.domain.grounding_index import OccurrenceIndex, keep_index, kept_index
from app.domain.record_delta import applied, delta_of
from app.storage import fact_log
from app.storage.caches import Keyed, caches_of, fold_key
from app.storage.tables import CheckpointRow, Fact

__all__ = [
    "DERIVATION",
    "MAX_LINKS",
    "REFUSED",
    "Link",
    "Restored",
    "checkpointed_seq",
    "keep_link",
    "link_of",
    "prune",
    "reading_with",
    "remember_checkpoint",
    "restore",
    "restore_index",
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


MAX_LINKS = 64
"""Deltas a chain holds at most before the next link is written whole: a restore reads the
whole link and at most this many deltas."""

MAX_CHAIN_SHARE = 0.5
"""The bytes a chain's deltas hold at most, as a share of its whole link's, before the next
link is written whole: a restore reads at most this much more than a whole link."""

_MALFORMED = (ValueError, KeyError, TypeError, IndexError, zstandard.ZstdError)
"""What reading a body that is not what it says raises (the domain's readers raise ValueError,
or the KeyError, TypeError, IndexError of a record of the wrong shape)."""

_MEMO = ("checkpoint",)
"""The key of `Link` in its log's derived values (`LoggedColumns.derived`)."""


@dataclass(frozen=True)
class Link:
    """The newest link of a session's checkpoint this process wrote or restored: what the next
    delta is taken against. Kept with the log's columns it spans (`LoggedColumns.derived`), so
    it lives as long as the fold cache keeps them."""

    last_seq: int
    base_seq: int
    body_digest: str
    record: dict[str, Any]
    """The record the link was encoded from (`checkpoint_of`): spans of the columns as they
    were, which a newer record of the same columns extends."""
    deltas: int
    """Deltas between this link and its whole one."""
    chain_bytes: int
    """The bytes of those deltas' bodies."""
    base_bytes: int


def link_of(fold: Fold) -> Link | None:
    """The link kept with `fold`'s log, if this process wrote or restored one."""
    link = fold.logged.derived.get(_MEMO)
    return link if isinstance(link, Link) else None


@dataclass(frozen=True)
class Restored:
    """What a restore found: the fold (None when there was none to use), and why a checkpoint
    that was there was not used (None when it was, or when there was none)."""

    fold: Fold | None
    refused: str | None = None


def _log_digest(seq: int, kind: str, tokens: int, item: Any) -> str:
    encoded = orjson.dumps([seq, kind, tokens, item], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(encoded).hexdigest()


_LINK_COLUMNS = (
    CheckpointRow.last_seq,
    CheckpointRow.base_seq,
    CheckpointRow.previous_seq,
    CheckpointRow.previous_digest,
    CheckpointRow.derivation,
    CheckpointRow.log_digest,
    CheckpointRow.body_digest,
)


def restore(db: Session, *, session_pk: int, up_to_seq: int) -> Restored:
    """The session's newest checkpoint of a seq up to `up_to_seq` whose chain is whole,
    checked and restored (see the module docstring)."""
    found = _chain(db, session_pk, up_to_seq)
    if found is None or isinstance(found, str):
        return Restored(None, found)
    chain, bodies = found
    newest = chain[-1]
    fact = fact_log.get_fact(db, session_id=session_pk, seq=newest.last_seq)
    if (
        fact is None
        or _log_digest(fact.seq, fact.type, fact.tokens, fact.item) != newest.log_digest
    ):
        return Restored(None, "log_changed")
    if any(hashlib.sha256(bodies[link.last_seq]).hexdigest() != link.body_digest for link in chain):
        return Restored(None, "corrupt")
    try:
        decompress = zstandard.ZstdDecompressor().decompress
        record = decoded(decompress(bodies[chain[0].last_seq]))
        for link in chain[1:]:
            record = applied(record, decoded(decompress(bodies[link.last_seq])))
        store = ItemStore(
            _reader(db.get_bind().engine, session_pk),
            record["logged"]["order"],
            lock=threading.Lock(),
        )
        fold = restored(record, store)
    except _MALFORMED:
        log.warning(
            "session #%s: its checkpoint at seq %s is malformed", session_pk, newest.last_seq
        )
        return Restored(None, "malformed")
    if fold.last_seq != newest.last_seq:
        return Restored(None, "malformed")
    keep_link(
        fold,
        Link(
            last_seq=newest.last_seq,
            base_seq=newest.base_seq,
            body_digest=newest.body_digest,
            record=checkpoint_of(fold),
            deltas=len(chain) - 1,
            chain_bytes=sum(len(bodies[link.last_seq]) for link in chain[1:]),
            base_bytes=len(bodies[chain[0].last_seq]),
        ),
    )
    return Restored(fold)


_READS = 3
"""Times a restore reads a session's links at most: another worker's whole link may remove
links of the chain it chose between its read of the links and its read of their bodies."""


def _chain(
    db: Session, session_pk: int, up_to_seq: int
) -> tuple[list[Row[Any]], dict[int, bytes]] | str | None:
    """The session's newest chain of links up to `up_to_seq` that is whole (oldest first), and
    its bodies; None when the session has no link up to it, or why none can be used."""
    for _ in range(_READS):
        links = db.execute(
            select(*_LINK_COLUMNS)
            .where(CheckpointRow.session_id == session_pk, CheckpointRow.last_seq <= up_to_seq)
            .order_by(CheckpointRow.last_seq.desc())
        ).all()
        if not links:
            return None
        ours = [link for link in links if link.derivation == DERIVATION]
        if not ours:
            return "derived_by_other_code"
        chain = _newest_chain(cast(list[Row[Any]], ours))
        if chain is None:
            return "broken_chain"
        bodies = _bodies(db, session_pk, [link.last_seq for link in chain])
        if all(link.last_seq in bodies for link in chain):
            return chain, bodies
    return "broken_chain"


def _newest_chain(links: Sequence[Row[Any]]) -> list[Row[Any]] | None:
    """The newest of `links` (newest first) whose chain, back to its whole link, is all among
    them, each link the one its successor names: that chain, oldest first."""
    by_seq = {link.last_seq: link for link in links}
    for newest in links:
        chain, link = [newest], newest
        while link.previous_seq is not None and len(chain) <= len(links):
            previous = by_seq.get(link.previous_seq)
            if previous is None or previous.body_digest != link.previous_digest:
                break
            chain.append(previous)
            link = previous
        if link.previous_seq is None:
            return chain[::-1]
    return None


def _bodies(
    db: Session, session_pk: int, seqs: Sequence[int], *, column: Any = CheckpointRow.body
) -> dict[int, bytes]:
    """The bodies (`column`: or the index bodies) of the session's links at `seqs` that have
    one. On PostgreSQL they are read in binary (as text, a body would travel as hex, twice its
    bytes, and be decoded)."""
    query = select(CheckpointRow.last_seq, column).where(
        CheckpointRow.session_id == session_pk,
        CheckpointRow.last_seq.in_(seqs),
        column.is_not(None),
    )
    connection = db.connection()
    if connection.dialect.name != "postgresql":
        return dict(connection.execute(query).all())
    driver = connection.connection.driver_connection
    compiled = query.compile(
        dialect=connection.dialect, compile_kwargs={"render_postcompile": True}
    )
    with driver.cursor(binary=True) as cursor:  # type: ignore[union-attr]
        cursor.execute(str(compiled), compiled.params)
        return {seq: bytes(body) for seq, body in cursor.fetchall()}


REFUSED = -1
"""`checkpointed_seq` of a session whose checkpoint this process refused: the next write
replaces it, whatever its seq."""


def checkpointed_seq(db: Session, session: Keyed) -> int:
    """The seq of the session's newest checkpoint link (0: none; `REFUSED`), as this process
    last wrote or read it."""
    key = fold_key(db, session)
    caches = caches_of(db)
    with caches.folds_lock:
        known = caches.checkpointed.get(key)
    if known is None:
        known = (
            db.execute(
                select(func.max(CheckpointRow.last_seq)).where(
                    CheckpointRow.session_id == session.id
                )
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
) -> Link | None:
    """Writes `fold` as the session's newest checkpoint link: as a delta against the link this
    process keeps with the fold's log (`link_of`) while that link's chain is still in the
    database and short (`MAX_LINKS`, `MAX_CHAIN_SHARE`), else whole,
    then the session's older links go (all its others, with `replace`: a checkpoint refused).
    The link written, or None when the log lacks the fold's last fact (a fold of nothing) or
    another worker wrote a link of that seq first. Does not commit; the caller keeps the link
    (`keep_link`) once committed."""
    fact = fact_log.get_fact(db, session_id=session_pk, seq=fold.last_seq)
    if fact is None:
        return None
    record = checkpoint_of(fold)
    previous = None if replace else _extendable(db, session_pk, link_of(fold))
    index_body: bytes | None = None
    compress = zstandard.ZstdCompressor(level=_LEVEL).compress
    if previous is not None:
        body = compress(encoded(delta_of(record, previous.record)))
        link = Link(
            last_seq=fold.last_seq,
            base_seq=previous.base_seq,
            body_digest=hashlib.sha256(body).hexdigest(),
            record=record,
            deltas=previous.deltas + 1,
            chain_bytes=previous.chain_bytes + len(body),
            base_bytes=previous.base_bytes,
        )
    else:
        body = compress(encoded(record))
        digest = hashlib.sha256(body).hexdigest()
        link = Link(fold.last_seq, fold.last_seq, digest, record, 0, 0, len(body))
        index = kept_index(LoggedUpTo(fold.logged, fold.logged_length))
        if index is not None:
            index_body = compress(encoded(index.record()))
    if previous is None:
        older = delete(CheckpointRow).where(CheckpointRow.session_id == session_pk)
        db.execute(older if replace else older.where(CheckpointRow.last_seq < link.last_seq))
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    statement = (
        dialect.insert(CheckpointRow)
        .values(
            session_id=session_pk,
            last_seq=link.last_seq,
            base_seq=link.base_seq,
            previous_seq=None if previous is None else previous.last_seq,
            previous_digest=None if previous is None else previous.body_digest,
            derivation=DERIVATION,
            log_digest=_log_digest(fact.seq, fact.type, fact.tokens, fact.item),
            body_digest=link.body_digest,
            body=body,
            index_digest=None if index_body is None else hashlib.sha256(index_body).hexdigest(),
            index_body=index_body,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=["session_id", "last_seq"])
        .returning(CheckpointRow.last_seq)
    )
    if db.execute(statement).scalar_one_or_none() is None:
        return None
    return link


def restore_index(db: Session, *, session_pk: int, logged: LoggedUpTo) -> bool:
    """Keeps with `logged` the grader's occurrence index its checkpoint holds (the whole link
    of the chain it was restored from, checked against its hash), unless an index is kept with
    it already; whether it did. The grader then indexes only the facts after it."""
    link = logged.derived.get(_MEMO)
    if not isinstance(link, Link) or kept_index(logged) is not None:
        return False
    digest = db.execute(
        select(CheckpointRow.index_digest).where(
            CheckpointRow.session_id == session_pk,
            CheckpointRow.last_seq == link.base_seq,
            CheckpointRow.derivation == DERIVATION,
        )
    ).scalar_one_or_none()
    if digest is None:
        return False
    body = _bodies(db, session_pk, [link.base_seq], column=CheckpointRow.index_body).get(
        link.base_seq
    )
    if body is None or hashlib.sha256(body).hexdigest() != digest:
        return False
    try:
        index = OccurrenceIndex.restored(decoded(zstandard.ZstdDecompressor().decompress(body)))
    except _MALFORMED:
        log.warning(
            "session #%s: its occurrence index at seq %s is malformed", session_pk, link.base_seq
        )
        return False
    keep_index(logged, index, threading.Lock())
    return True


def prune(db: Session, *, older_than: datetime, limit: int) -> int:
    """Deletes the checkpoints of up to `limit` sessions whose newest link was written before
    `older_than` (sessions no one has appended to since: resumed, one folds its log once);
    how many sessions' checkpoints it deleted."""
    newer = aliased(CheckpointRow)
    stale = (
        select(CheckpointRow.session_id)
        .where(
            CheckpointRow.created_at < older_than,
            ~exists().where(
                newer.session_id == CheckpointRow.session_id, newer.created_at >= older_than
            ),
        )
        .distinct()
        .limit(limit)
    )
    sessions = list(db.scalars(stale))
    if sessions:
        db.execute(delete(CheckpointRow).where(CheckpointRow.session_id.in_(sessions)))
    return len(sessions)


def _extendable(db: Session, session_pk: int, link: Link | None) -> Link | None:
    """`link`, if a delta may be written against it: its chain is short and still whole in the
    database (a newer whole link another worker wrote makes the older ones go)."""
    if (
        link is None
        or link.deltas >= MAX_LINKS
        or link.chain_bytes > link.base_bytes * MAX_CHAIN_SHARE
    ):
        return None
    found = dict(
        db.execute(
            select(CheckpointRow.last_seq, CheckpointRow.body_digest).where(
                CheckpointRow.session_id == session_pk,
                CheckpointRow.last_seq.in_({link.last_seq, link.base_seq}),
            )
        ).all()
    )
    if found.get(link.last_seq) != link.body_digest or link.base_seq not in found:
        return None
    return link


def keep_link(fold: Fold, link: Link) -> None:
    """Keeps `link` (written and committed, or restored) with `fold`'s log: this process's
    next link is a delta against it."""
    fold.logged.derived[_MEMO] = link


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
