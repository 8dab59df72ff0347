"""Whether this process can serve: its database answers within the service's deadline and
holds the newest schema."""

from __future__ import annotations

from typing import Literal

import anyio
import anyio.to_thread
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.settings import Settings
from app.storage.database import answer_deadline, is_migrated

__all__ = ["Readiness", "readiness"]

Readiness = Literal["ready", "database_unavailable", "not_migrated"]


async def readiness(engine: Engine, settings: Settings) -> Readiness:
    """`GET /readyz`: ready, the database unreachable (or slower than the answer's deadline),
    or its schema behind the code's migrations."""
    try:
        # A check still waiting for a thread or the database at the deadline is left to
        # finish on its own: its own waits are bounded too.
        with anyio.fail_after(answer_deadline(settings)):
            migrated = await anyio.to_thread.run_sync(is_migrated, engine, abandon_on_cancel=True)
    except (SQLAlchemyError, TimeoutError):
        return "database_unavailable"
    return "ready" if migrated else "not_migrated"
