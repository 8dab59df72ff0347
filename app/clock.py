"""The service's clock: the one place that reads the time the service decides by (when a fact
was recorded, when an assembly was made, how long a lineage's prompt cache has been idle; an
evaluation replays a log on the times its facts were recorded). `create_app` takes another, so
that a test or a replay can move time on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "seconds_between", "system_clock"]

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def seconds_between(later: datetime, earlier: datetime) -> float:
    """Seconds from `earlier` to `later`; a time without a zone (as SQLite reads one back) is
    UTC, as every time the service stores is."""
    later, earlier = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (later, earlier))
    return (later - earlier).total_seconds()
