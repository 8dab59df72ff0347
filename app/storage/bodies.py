"""Candidate bodies by digest, once per session: what stored requests name (see
`app.domain.addressing`).

Invariant: a kept plan can always read every body it names. A plan is written only once each
of its bodies has a row whose `created_at` is at most `REFRESH` older than the plan (an older
row is refreshed to now in the plan's transaction); `created_at` only moves forward; and
retention deletes only rows older than the plans' age cutoff by more than `REFRESH`
(`prune_bodies`), which no row a kept plan names can be.

A process remembers the rows it wrote or read fresh (the app's caches, `app.storage.caches`:
200,000 digests in all, at most `_KNOWN_PER_SESSION` per session key), so that a session
offering the same files call after call writes its plan in one statement, as a plan with no
bodies. A row it names is never deleted while younger than `REFRESH` (retention keeps far older
ones), so an entry younger than that needs no read.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.storage.caches import caches_of
from app.storage.tables import CandidateBody

__all__ = ["REFRESH", "get_bodies", "prune_bodies", "put_bodies"]

REFRESH = timedelta(days=1)
"""How old a body's row may be for a new plan to name it without refreshing it."""

_KNOWN_PER_SESSION = 50_000
"""Digests remembered per session key at most (a session offering more starts over)."""


def put_bodies(
    db: Session, *, tenant_id: int, session_key: int, bodies: Mapping[str, bytes], now: datetime
) -> None:
    """Make each of `bodies` (by digest) readable by a plan written now, in `db`'s transaction:
    none, one or two statements, by what this process already knows."""
    if not bodies:
        return
    key = (weakref.ref(db.get_bind().engine), tenant_id, session_key)
    fresh_since = now - REFRESH
    caches = caches_of(db)
    with caches.fresh_bodies_lock:
        fresh = caches.fresh_bodies.get(key) or {}
        unknown = [digest for digest in bodies if fresh.get(digest, fresh_since) <= fresh_since]
    if not unknown:
        return
    found = db.execute(
        select(CandidateBody.digest, CandidateBody.created_at).where(
            CandidateBody.session_key == session_key,
            CandidateBody.tenant_id == tenant_id,
            CandidateBody.digest.in_(unknown),
            CandidateBody.created_at > fresh_since,
        )
    ).all()
    known: dict[str, datetime] = {str(digest): created_at for digest, created_at in found}
    missing = [digest for digest in unknown if digest not in known]
    if missing:
        _upsert(
            db,
            tenant_id=tenant_id,
            session_key=session_key,
            bodies=bodies,
            now=now,
            digests=missing,
        )
        known.update(dict.fromkeys(missing, now))
    with caches.fresh_bodies_lock:
        fresh = caches.fresh_bodies.get(key) or {}
        if len(fresh) + len(known) > _KNOWN_PER_SESSION:
            fresh = {}
        caches.fresh_bodies[key] = {**fresh, **known}


def _upsert(
    db: Session,
    *,
    tenant_id: int,
    session_key: int,
    bodies: Mapping[str, bytes],
    digests: Iterable[str],
    now: datetime,
) -> None:
    """Insert the bodies, or refresh the `created_at` of rows that hold them already."""
    dialect = postgresql if db.get_bind().dialect.name == "postgresql" else sqlite
    rows = [
        {
            "session_key": session_key,
            "tenant_id": tenant_id,
            "digest": digest,
            "body": bodies[digest].decode(),
            "created_at": now,
        }
        for digest in digests
    ]
    statement = dialect.insert(CandidateBody)
    upsert = statement.on_conflict_do_update(
        index_elements=["session_key", "tenant_id", "digest"],
        set_={"created_at": statement.excluded.created_at},
    )
    db.execute(upsert, rows)


def get_bodies(
    db: Session, *, tenant_id: int, session_key: int, digests: Iterable[str]
) -> dict[str, bytes]:
    """The bodies stored under `digests` (those found)."""
    wanted = list(digests)
    if not wanted:
        return {}
    found = db.execute(
        select(CandidateBody.digest, CandidateBody.body).where(
            CandidateBody.session_key == session_key,
            CandidateBody.tenant_id == tenant_id,
            CandidateBody.digest.in_(wanted),
        )
    ).all()
    return {digest: body.encode() for digest, body in found}


def prune_bodies(db: Session, *, plans_older_than: datetime, limit: int) -> int:
    """Delete at most `limit` bodies no kept plan can name: rows older than the plans' age
    cutoff by more than `REFRESH`. Returns the number deleted."""
    key = (CandidateBody.session_key, CandidateBody.tenant_id, CandidateBody.digest)
    doomed = select(*key).where(CandidateBody.created_at < plans_older_than - REFRESH).limit(limit)
    result = db.execute(delete(CandidateBody).where(tuple_(*key).in_(doomed)))
    return int(getattr(result, "rowcount", 0) or 0)
