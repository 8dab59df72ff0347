"""How long a call may take and when it is tried again.

A call is tried again only when doing so cannot apply it twice:
- a 503 or a 429 (the service says it could not serve the request now) and a connection
  that never opened are retried for every call;
- a connection that broke after the request went out (the answer lost, the request perhaps
  applied) is retried only for reads and for appends, whose idempotency key makes the service
  answer a repeat with the original response and write nothing.
Retries are bounded by `Retries.attempts` and by `Timeouts.total`, which covers the whole call,
waits included: a wait that would end past it is not started.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from contextd_client.errors import ContextdError, Unavailable

NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport failures before any byte of the request left: safe to repeat for any call."""
ANSWER_LOST = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
"""Transport failures that may come after the service applied the request."""


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Seconds. `connect` and `read` bound each attempt's socket operations; `total` bounds the
    whole call, retries and their waits included."""

    connect: float = 5.0
    read: float = 60.0
    total: float = 120.0

    def for_attempt(self, remaining: float) -> httpx.Timeout:
        """The attempt's limits, none past what is left of the total."""
        connect = max(0.001, min(self.connect, remaining))
        read = max(0.001, min(self.read, remaining))
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)


@dataclass(frozen=True, kw_only=True)
class Retries:
    """`attempts` counts the first try. Without a `Retry-After`, waits double from `backoff`
    up to `max_backoff`."""

    attempts: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0

    def wait_before_retry(
        self,
        failure: ContextdError | httpx.TransportError,
        *,
        attempt: int,
        remaining: float,
        is_idempotent: bool,
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None: give up and raise."""
        if attempt >= self.attempts or not is_retryable(failure, is_idempotent=is_idempotent):
            return None
        wait = failure.retry_after if isinstance(failure, Unavailable) else None
        if wait is None:
            wait = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return wait if wait < remaining else None


def is_retryable(failure: ContextdError | httpx.TransportError, *, is_idempotent: bool) -> bool:
    if isinstance(failure, ContextdError):
        return isinstance(failure, Unavailable)
    return isinstance(failure, NOT_SENT) or (is_idempotent and isinstance(failure, ANSWER_LOST))
