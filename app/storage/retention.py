"""Retention of stored plans: a periodic cleanup by age and count. It never touches facts."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.settings import Settings
from app.storage import plans

log = logging.getLogger("contextd")


def prune_once(factory: sessionmaker[Session], settings: Settings) -> int:
    """One round of retention, in batches of `assembly_retention_batch` plans, each its own
    transaction; returns the number deleted."""
    cutoff = datetime.now(UTC) - timedelta(days=settings.assembly_retention_days)
    batch = settings.assembly_retention_batch
    total = 0
    while True:
        with factory() as db:
            deleted = plans.prune_assemblies(
                db,
                older_than=cutoff,
                keep_per_session=settings.assembly_retention_per_session,
                keep_per_tenant=settings.assembly_retention_per_tenant,
                limit=batch,
            )
            db.commit()
        total += deleted
        if deleted < batch:
            return total


async def prune_periodically(factory: sessionmaker[Session], settings: Settings) -> None:
    """Runs for the life of the process; a database outage only skips a round."""
    while True:
        await asyncio.sleep(settings.assembly_cleanup_interval_seconds)
        try:
            deleted = await asyncio.to_thread(prune_once, factory, settings)
        except SQLAlchemyError as exc:
            log.warning("assembly retention skipped: %s", type(exc).__name__)
            continue
        if deleted:
            log.info("assembly retention deleted %d stored plans", deleted)
