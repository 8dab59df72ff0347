"""Retention of stored plans: a periodic cleanup by age and count. It never touches facts.

On PostgreSQL stored plans are partitioned by week of `created_at` (`tables.AssemblyRow`), and
age out a week at a time:

- a write never fails for want of a partition: the default partition takes a plan no week's
  partition does, and the partitions of this week and the next are made at start and on every
  round, so a round that fails (for a lock it did not get, say) is tried again for a week
  before a plan could need its partition. A week's partition made while the default partition
  holds plans of that week takes them in; plans of weeks past the cutoff left there are
  deleted by age. After a pause of any length the first round makes the partitions the
  present needs, and drops the expired ones;
- a week's partition is dropped once every plan it can hold is older than the cutoff
  (`assembly_retention_days`): a plan is kept at least that long and at most a week (and a
  round) longer. Dropping a partition deletes no rows one by one, so it leaves no dead tuples
  for vacuum and takes no row locks;
- partition DDL never stalls the write path for long: each statement gives up if it has not
  got its lock within `PARTITION_LOCK_TIMEOUT_MS` (creating or dropping a partition takes an
  exclusive lock on the whole table for an instant, and the plans' reads and writes would
  queue behind a statement waiting for it), and is tried again next round. Replicas that
  maintain partitions at once take turns (an advisory lock).

Candidate bodies (`app.storage.bodies`) are deleted once no kept plan can name them, in the
same batches; evaluation jobs (`app.storage.evaluations`) once their row has not moved for as
long as a plan is kept.

The per-session and per-tenant bounds delete rows, on both engines, in batches of
`assembly_retention_batch`, each its own transaction; on SQLite the age bound does too.
Pinned by `tests/integration/test_partition_retention.py` and `test_retention.py`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.storage import bodies, checkpoints, evaluations
from app.storage.tables import AssemblyRow, week_of

log = logging.getLogger("contextd")

WEEK = timedelta(days=7)
PARTITION_LOCK_TIMEOUT_MS = 200
"""How long a partition's DDL waits for its lock: the plans' statements last milliseconds, so
a moment of quiet comes soon, and none waits behind the DDL longer than this."""
_PARTITION_NAME = re.compile(r"assemblies_p(\d{8})")
_LOCK_NOT_AVAILABLE = "55P03"
_TAKE_MAINTENANCE_LOCK = text(f"SELECT pg_advisory_xact_lock({0x63747870}, 1)")
"""The advisory lock (a two-part key, apart from the plans' one-part ones) a replica holds
while it changes partitions."""

_PARTITIONS = text(
    "SELECT child.relname FROM pg_inherits"
    " JOIN pg_class child ON child.oid = pg_inherits.inhrelid"
    " WHERE pg_inherits.inhparent = 'assemblies'::regclass"
)
_STRAY_WEEKS = text(
    "SELECT DISTINCT date_trunc('week', created_at AT TIME ZONE 'UTC')::date"
    " FROM assemblies_default WHERE created_at >= :cutoff"
)
_HAS_STRAYS = text(
    "SELECT EXISTS (SELECT 1 FROM assemblies_default"
    " WHERE created_at >= :start AND created_at < :end)"
)
_MOVING = text("CREATE TEMPORARY TABLE moving (LIKE assemblies) ON COMMIT DROP")
_MOVE_STRAYS = text(
    "WITH moved AS (DELETE FROM assemblies_default"
    " WHERE created_at >= :start AND created_at < :end RETURNING *)"
    " INSERT INTO moving SELECT * FROM moved"
)
# A plan a kept plan of its week is stored against goes with the last of them.
_DELETE_OLD_STRAYS = text(
    "DELETE FROM assemblies_default WHERE ctid IN"
    " (SELECT ctid FROM assemblies_default WHERE created_at < :cutoff AND id NOT IN"
    " (SELECT base_id FROM assemblies_default WHERE created_at >= :cutoff"
    " AND base_id IS NOT NULL) LIMIT :limit)"
)


def partition_name(week: date) -> str:
    return f"assemblies_p{week:%Y%m%d}"


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _bound(day: date) -> str:
    return f"'{_midnight(day).isoformat()}'"


def _is_postgresql(factory: sessionmaker[Session]) -> bool:
    with factory() as db:
        return db.get_bind().dialect.name == "postgresql"


def _weeks(db: Session) -> set[date]:
    """The weeks that have a partition."""
    weeks = set()
    for name in db.scalars(_PARTITIONS):
        if found := _PARTITION_NAME.fullmatch(name):
            weeks.add(datetime.strptime(found[1], "%Y%m%d").replace(tzinfo=UTC).date())
    return weeks


def _change_partitions(db: Session, change: Callable[[Session], None], *, what: str) -> bool:
    """Run `change` in its own transaction under the maintenance lock and the DDL's lock
    timeout, and commit it; False (logged) when a lock was not to be had."""
    try:
        db.execute(_TAKE_MAINTENANCE_LOCK)
        db.execute(text(f"SET LOCAL lock_timeout = {PARTITION_LOCK_TIMEOUT_MS}"))
        change(db)
        db.commit()
    except OperationalError as exc:
        db.rollback()
        if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        log.warning("assembly retention: %s waits for the next round (table busy)", what)
        return False
    return True


def _create_partition(week: date) -> Callable[[Session], None]:
    name, start, end = partition_name(week), _bound(week), _bound(week + WEEK)
    # Instants, not dates: a date compared with a timestamp is read in the session's zone.
    span = {"start": _midnight(week), "end": _midnight(week + WEEK)}

    def create(db: Session) -> None:
        # Plans of the week written while it had no partition are in the default partition,
        # which must not hold any of the new partition's plans when it is made: they move.
        strays = db.scalar(_HAS_STRAYS, span)
        if strays:
            db.execute(_MOVING)
            db.execute(_MOVE_STRAYS, span)
        db.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF assemblies"
                f" FOR VALUES FROM ({start}) TO ({end})"
            )
        )
        if strays:
            db.execute(text("INSERT INTO assemblies SELECT * FROM moving"))

    return create


def prepare_partitions(factory: sessionmaker[Session], *, now: datetime, cutoff: datetime) -> None:
    """Make the partitions of this week and the next, and of every week since `cutoff` whose
    plans went to the default partition (taking them in)."""
    with factory() as db:
        have = _weeks(db)
        wanted = {week_of(now), week_of(now) + WEEK, *db.scalars(_STRAY_WEEKS, {"cutoff": cutoff})}
    for week in sorted(wanted - have):
        with factory() as db:
            name = partition_name(week)
            if _change_partitions(db, _create_partition(week), what=f"creating {name}"):
                log.info("assembly retention: partition %s made", name)


def drop_expired_partitions(factory: sessionmaker[Session], *, cutoff: datetime) -> list[str]:
    """Drop every week's partition whose plans are all older than `cutoff`; their names."""
    with factory() as db:
        expired = sorted(
            week for week in _weeks(db) if week + WEEK <= cutoff.astimezone(UTC).date()
        )
    dropped = []
    for week in expired:
        name = partition_name(week)

        def drop(db: Session, name: str = name) -> None:
            db.execute(text(f"DROP TABLE IF EXISTS {name}"))

        with factory() as db:
            if _change_partitions(db, drop, what=f"dropping {name}"):
                dropped.append(name)
    if dropped:
        log.info("assembly retention dropped the partitions %s", ", ".join(dropped))
    return dropped


def _in_batches(
    factory: sessionmaker[Session], delete: Callable[[Session], int], batch: int
) -> int:
    total = 0
    while True:
        with factory() as db:
            deleted = delete(db)
            db.commit()
        total += deleted
        if deleted < batch:
            return total


def prune_once(
    factory: sessionmaker[Session], settings: Settings, *, now: datetime | None = None
) -> int:
    """One round of retention as of `now` (the present by default); returns the number of plans
    deleted row by row (those dropped with their week's partition are logged, not counted)."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=settings.assembly_retention_days)
    batch = settings.assembly_retention_batch
    total = 0
    older_than: datetime | None = cutoff
    # The oldest a kept plan can be: a week's partition outlives the cutoff by up to a week.
    oldest_kept = cutoff
    if _is_postgresql(factory):
        oldest_kept = cutoff - WEEK
        prepare_partitions(factory, now=now, cutoff=cutoff)
        drop_expired_partitions(factory, cutoff=cutoff)
        total += _in_batches(
            factory,
            lambda db: int(
                getattr(
                    db.execute(_DELETE_OLD_STRAYS, {"cutoff": cutoff, "limit": batch}),
                    "rowcount",
                    0,
                )
            ),
            batch,
        )
        older_than = None
    total += _in_batches(
        factory,
        lambda db: prune_assemblies(
            db,
            older_than=older_than,
            keep_per_session=settings.assembly_retention_per_session,
            keep_per_tenant=settings.assembly_retention_per_tenant,
            limit=batch,
        ),
        batch,
    )
    _in_batches(
        factory,
        lambda db: bodies.prune_bodies(db, plans_older_than=oldest_kept, limit=batch),
        batch,
    )
    _in_batches(factory, lambda db: evaluations.prune(db, older_than=cutoff, limit=batch), batch)
    idle = now - timedelta(days=settings.checkpoint_retention_days)
    _in_batches(factory, lambda db: checkpoints.prune(db, older_than=idle, limit=batch), batch)
    return total


async def prune_periodically(factory: sessionmaker[Session], settings: Settings) -> None:
    """Runs for the life of the process: makes the partitions the present needs at once, then
    prunes every `assembly_cleanup_interval_seconds`; a database outage only skips a round."""
    if await asyncio.to_thread(_is_postgresql, factory):
        now = datetime.now(UTC)
        cutoff = now - timedelta(days=settings.assembly_retention_days)
        try:
            await asyncio.to_thread(prepare_partitions, factory, now=now, cutoff=cutoff)
        except SQLAlchemyError as exc:
            log.warning("assembly partitions not prepared at start: %s", type(exc).__name__)
    while True:
        await asyncio.sleep(settings.assembly_cleanup_interval_seconds)
        try:
            deleted = await asyncio.to_thread(prune_once, factory, settings)
        except SQLAlchemyError as exc:
            log.warning("assembly retention skipped: %s", type(exc).__name__)
            continue
        if deleted:
            log.info("assembly retention deleted %d stored plans", deleted)


def prune_assemblies(
    db: Session,
    *,
    older_than: datetime | None,
    keep_per_session: int,
    keep_per_tenant: int,
    limit: int,
) -> int:
    """Delete at most `limit` stored assemblies: those beyond the newest `keep_per_session` of
    their session (a tenant's stateless ones count as one session), or beyond the newest
    `keep_per_tenant` of their tenant (so that no tenant's plans crowd the store), and, unless
    `older_than` is None, those older than it (on PostgreSQL, plans age out with their week's
    partition instead: `app.storage.retention`). Facts are never touched. Returns the number
    deleted; a caller prunes in rounds, committing each, so that no statement holds its row
    locks (and the write path behind them) for long."""
    ranked = select(
        AssemblyRow.id,
        AssemblyRow.base_id,
        AssemblyRow.created_at,
        func.row_number()
        .over(
            partition_by=(AssemblyRow.tenant_id, AssemblyRow.session_key),
            order_by=AssemblyRow.id.desc(),
        )
        .label("in_session"),
        func.row_number()
        .over(partition_by=AssemblyRow.tenant_id, order_by=AssemblyRow.id.desc())
        .label("in_tenant"),
    ).subquery()
    beyond = (ranked.c.in_session > keep_per_session) | (ranked.c.in_tenant > keep_per_tenant)
    if older_than is not None:
        beyond |= ranked.c.created_at < older_than
    # A plan stored whole that a kept plan is stored against is kept with it.
    bases_kept = select(ranked.c.base_id).where(~beyond, ranked.c.base_id.is_not(None))
    doomed = select(ranked.c.id).where(beyond, ranked.c.id.not_in(bases_kept)).limit(limit)
    result = db.execute(delete(AssemblyRow).where(AssemblyRow.id.in_(doomed)))
    return int(getattr(result, "rowcount", 0) or 0)
