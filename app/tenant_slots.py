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

    @contextmanager
    def taken(self, tenant_id: int, *, limit: int) -> Iterator[bool]:
        """Whether the tenant had fewer than `limit` under way: a slot is then held until the
        block ends; else none is, and the caller refuses or skips the work."""
        with self._lock:
            if self._under_way[tenant_id] >= limit:
                taken = False
            else:
                self._under_way[tenant_id] += 1
                taken = True
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    self._under_way[tenant_id] -= 1
                    if not self._under_way[tenant_id]:
                        del self._under_way[tenant_id]
