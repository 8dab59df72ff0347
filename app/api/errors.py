"""The one error table: every failure leaves as `{"error": {"code", "message", "details"}}`.

Bad input never becomes a 500, and no body ever carries a stack trace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match

from app.domain import errors
from app.metrics import DATABASE_UNAVAILABLE
from app.storage.database import nothing_sent, server_gone_elsewhere

log = logging.getLogger("contextd")

STATUS_BY_ERROR: dict[type[errors.ContextdError], int] = {
    errors.InvalidInput: 422,
    errors.Unauthorized: 401,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.PayloadTooLarge: 413,
    errors.TenantBusy: 429,
    errors.DatabaseUnavailable: 503,
}
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "tenant_busy",
}


class ErrorBody(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    error: ErrorBody


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Malformed JSON.",
        401: "Missing or unknown API key.",
        404: "Not found (or owned by another tenant).",
        409: "Conflict.",
        413: "Body or item too large.",
        422: "Validation failed.",
        503: "Database unavailable; retry after the given seconds. For a request that writes,"
        " `details.write_in_doubt` says whether the write may have been applied (the database"
        " went quiet after it was sent): a retry with the same idempotency key is safe.",
    }.items()
}


def rule_responses(*rules: str) -> dict[int | str, dict[str, Any]]:
    """The 422 of an operation that checks `rules` (of `errors.RULES`) beyond its schema: each
    named in the description and listed under `x-rules`, so a tool can tell a broken rule the
    contract states from a refused valid request."""
    listed = "".join(f"\n- `{rule}`: {errors.RULES[rule]}" for rule in rules)
    return {
        422: {
            "model": ErrorResponse,
            "description": "Validation failed (`validation_error`), or a rule the schema cannot "
            "state was broken, answered with the rule's code:" + listed,
            "x-rules": [{"code": rule, "rule": errors.RULES[rule]} for rule in rules],
        }
    }


ERROR_RESPONSES[401]["headers"] = {
    "WWW-Authenticate": {
        "description": 'The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with '
        '`error="invalid_token"` for an unknown key, `error="invalid_request"` for a '
        "malformed header.",
        "schema": {"type": "string"},
    }
}


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at the request's path, and OPTIONS: asked of the routes
    themselves, one method at a time (included routers answer for their own routes)."""
    routes: list[BaseRoute] = list(request.app.router.routes)
    allowed = {
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    }
    return sorted(allowed | {"OPTIONS"})


async def _on_contextd_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.ContextdError)
    status = next((s for kind, s in STATUS_BY_ERROR.items() if isinstance(exc, kind)), 409)
    headers = _unavailable_headers(request) if status in (429, 503) else None
    if isinstance(exc, errors.Unauthorized):
        headers = {"WWW-Authenticate": errors.bearer_challenge(exc.error)}
    if status == 503:
        DATABASE_UNAVAILABLE.inc()
    return error_response(status, exc.code, exc.message, exc.details, headers)


async def _on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = list(exc.errors())
    decoding = [problem for problem in problems if problem.get("type") == "json_invalid"]
    if decoding:
        reasons = [
            {"loc": list(problem.get("loc", ())), "msg": str(problem.get("ctx", {}).get("error"))}
            for problem in decoding
        ]
        return error_response(400, "malformed_json", "the request body is not valid JSON", reasons)
    details = [
        {"loc": list(problem.get("loc", ())), "msg": str(problem.get("msg", ""))}
        for problem in problems
    ]
    # A request whose only faults are rules the schema cannot state is answered with the
    # rule's own code, as the operation's contract lists it.
    rules = [problem["type"] for problem in problems if problem.get("type") in errors.RULES]
    if len(rules) == len(problems):
        return error_response(422, rules[0], str(problems[0].get("msg", "")), details)
    return error_response(422, "validation_error", "the request failed validation", details)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = exc.headers
    if exc.status_code == 405:
        # The router names only the first route the path matched; every route counts.
        allow = ", ".join(_allowed_methods(request))
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": allow})
        headers = {**(headers or {}), "Allow": allow}
    code = HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


WRITE_IN_DOUBT = (
    "the database stopped answering while this request's write was under way: it may have been"
    " applied. Retrying is safe where a repeat is recognized: an append with the same"
    " idempotency_key returns its original answer and writes nothing, a session is created"
    " once under its id; GET reads what was applied"
)


async def _on_database_down(request: Request, exc: Exception) -> JSONResponse:
    """A 503 with `Retry-After`. A request that writes learns whether its write may have been
    applied (`details.write_in_doubt`): the database may have committed it before going quiet."""
    DATABASE_UNAVAILABLE.inc()
    cause = getattr(exc, "orig", None)  # the driver's error, named in the one line logged
    log.warning("database unavailable: %s", type(cause or exc).__name__)
    message, details = "the database is unavailable; retry later", None
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        in_doubt = not nothing_sent(exc)
        details = {"write_in_doubt": in_doubt}
        if in_doubt:
            message = WRITE_IN_DOUBT
        else:
            message = "the database is unavailable and nothing was written; retry later"
    return error_response(
        503, "database_unavailable", message, details, headers=_unavailable_headers(request)
    )


async def _on_unstorable_value(_request: Request, exc: Exception) -> JSONResponse:
    # The database refused a value the wire models let through (a NUL character in a path or
    # an item type, say): the caller's input, so a 422, and nothing was written.
    log.info("value refused by the database: %s", type(exc).__name__)
    return error_response(
        422,
        "unstorable_value",
        "a value cannot be stored (text may not contain a NUL character)",
        [{"loc": ["request"], "msg": "value refused by the database"}],
    )


async def _on_database_error(request: Request, exc: Exception) -> Response:
    """A database error of no class the service answers by its kind: a 503 when it says the
    host can no longer take writes (`SERVER_GONE_ELSEWHERE`: a standby, a demoted primary),
    else a fault of the service."""
    assert isinstance(exc, DBAPIError)
    if server_gone_elsewhere(exc.orig):
        return await _on_database_down(request, exc)
    return await _on_unexpected(request, exc)


async def _on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal_error", "an internal error occurred")


def _unavailable_headers(request: Request) -> dict[str, str]:
    return {"Retry-After": str(request.app.state.settings.retry_after_seconds)}


def install_error_handlers(app: FastAPI) -> None:
    """Every failure answered in the one error shape: the service's own errors by
    `STATUS_BY_ERROR`, validation as 422 (a broken rule under its code) or 400 for malformed
    JSON, a database that cannot answer as 503 with `Retry-After`, anything else as a 500 that
    carries no trace."""
    app.add_exception_handler(errors.ContextdError, _on_contextd_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_error)
    for database_error in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(database_error, _on_database_down)
    app.add_exception_handler(DataError, _on_unstorable_value)
    app.add_exception_handler(DBAPIError, _on_database_error)
    app.add_exception_handler(Exception, _on_unexpected)
