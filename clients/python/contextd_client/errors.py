"""Every failure a call can end in, carrying the service's error shape.

The service answers every error as `{"error": {"code", "message", "details"}}`; the status
picks the class, the body fills it. A call that got no answer at all (the service unreachable
after the retries it was allowed) raises `Unreachable`, whose `status` is None.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx
from pydantic import ValidationError

from contextd_client.models import ErrorResponse


def explained(message: str, details: Any) -> str:
    """The service's `message`, then each of its `details` (`{loc, msg}`) the message does not
    already say: a generic "the request failed validation" names no field and no allowed
    value; its details do."""
    notes: list[str] = []
    for detail in details if isinstance(details, list) else []:
        note = detail.get("msg") if isinstance(detail, dict) else None
        if not isinstance(note, str) or note in message:
            continue
        where = ".".join(str(part) for part in detail.get("loc", []) if part != "body")
        notes.append(f"{where}: {note}" if where else note)
    return "; ".join([message, *notes])


class ContextdError(Exception):
    """An error answer of the service (or none at all: `Unreachable`). `str()` of it is the
    status, the code, the message and what the details add (`explained`); `message` is the
    service's sentence alone."""

    def __init__(self, message: str, *, status: int | None, code: str, details: Any = None) -> None:
        said = explained(message, details)
        super().__init__(f"{status} {code}: {said}" if status else f"{code}: {said}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class EvaluationEnded(ContextdError):
    """An evaluation job ended without a result: it failed (its `error` says why: the replay,
    the service stopping, or the job lost with its process) or was cancelled."""

    def __init__(self, job: Any) -> None:
        super().__init__(
            f"evaluation {job.evaluation_id} {job.status}"
            + (f": {job.error}" if job.error else ""),
            status=None,
            code=f"evaluation_{job.status}",
        )
        self.job = job


class BadRequest(ContextdError):
    """400: the body was not valid JSON."""


class Unauthorized(ContextdError):
    """401: the API key is missing or unknown."""


class NotFound(ContextdError):
    """404: no such resource, or another tenant's."""


class Conflict(ContextdError):
    """409: the request contradicts the stored state (and wrote nothing)."""


class SequenceConflict(Conflict):
    """409 `sequence_conflict`: `expected_last_seq` was not the session's last seq."""

    def __init__(self, message: str, *, status: int | None, code: str, details: Any = None) -> None:
        super().__init__(message, status=status, code=code, details=details)
        seqs = details if isinstance(details, dict) else {}
        self.expected: int | None = seqs.get("expected")
        self.actual: int | None = seqs.get("actual")


class PayloadTooLarge(ContextdError):
    """413: the body or an item is over the service's limit (named in the message)."""


class ValidationFailed(ContextdError):
    """422: well-formed JSON that breaks a rule; `details` lists `{"loc", "msg"}`."""


class Unavailable(ContextdError):
    """503: the service cannot serve now (its database is unreachable), or 429: the tenant has
    as many costly calls under way as it may (`tenant_busy`); retried by the client after the
    service's `Retry-After` until its attempts or its total time run out."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None,
        code: str,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, details=details)
        self.retry_after = retry_after


class ServerError(ContextdError):
    """Any other 5xx: a fault of the service, never of the request."""


class Unreachable(ContextdError):
    """No answer: the connection failed or broke (the httpx error is the `__cause__`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, code="unreachable")


_BY_STATUS: dict[int, type[ContextdError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
}


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds from now: either form RFC 9110 allows (delay or date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from(response: httpx.Response) -> ContextdError:
    """The exception an error answer stands for."""
    status = response.status_code
    try:
        body = ErrorResponse.model_validate_json(response.content).error
        code, message, details = body.code, body.message, body.details
    except ValidationError:
        # Not the service's shape: a proxy or load balancer in between answered.
        code, message, details = (
            f"http_{status}",
            response.text[:500] or response.reason_phrase,
            None,
        )
    if status in (429, 503):
        return Unavailable(
            message,
            status=status,
            code=code,
            details=details,
            retry_after=retry_after_seconds(response.headers.get("retry-after")),
        )
    if status == 409 and code == "sequence_conflict":
        return SequenceConflict(message, status=status, code=code, details=details)
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ContextdError)
    return kind(message, status=status, code=code, details=details)
