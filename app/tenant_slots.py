"""At most so many of one costly kind of work per tenant under way in this process: what keeps
one tenant's slow hooks or searches from taking every worker thread from the others."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TenantSlots"]


class TenantSlots:
    """Each tenant's count of the work under way, behind a lock (the work may start on any
    thread, or on the event loop)."""

    def __init__(self) -> None:
        self._under_way: Counter[int] = Counter()
        self._lock = threading.Lock()

    def take(self, tenant_id: int, *, limit: int) -> bool:
        """Whether the tenant had fewer than `limit` under way; if so a slot is now held, until
        `give_back` (which any thread may call: a job's runner gives back what its request
        took)."""
        with self._lock:
            if self._under_way[tenant_id] >= limit:
                return False
            self._under_way[tenant_id] += 1
            return True

    def give_back(self, tenant_id: int) -> None:
        with self._lock:
            self._under_way[tenant_id] -= 1
            if not self._under_way[tenant_id]:
                del self._under_way[tenant_id]

    @contextmanager
    def taken(self, tenant_id: int, *, limit: int) -> Iterator[bool]:
        """Whether the tenant had fewer than `limit` under way: a slot is then held until the
        block ends; else none is, and the caller refuses or skips the work."""
        taken = self.take(tenant_id, limit=limit)
        try:
            yield taken
        finally:
            if taken:
                self.give_back(tenant_id)
