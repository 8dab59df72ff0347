"""Dependency aliases: a database session per request and the caller's tenant.

Auth: `Authorization: Bearer <key>`; keys are looked up by SHA-256. With no key configured
anywhere the service is open and every request belongs to the `default` tenant (the CLI
refuses to serve open on a non-loopback address).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

import anyio
import anyio.to_thread
from cachetools import TTLCache
from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.api.json_body import parsed_body
from app.api.responses import after_answer_limiter
from app.clock import Clock
from app.domain.errors import Unauthorized
from app.domain.ids import hash_api_key
from app.hooks import HookCaller
from app.metrics import AFTER_ANSWER_FAILURES
from app.settings import Settings
from app.storage.database import answer_deadline, spend_at_most
from app.usecases import tenancy
from app.usecases.evaluation_jobs import EvaluationRunner

log = logging.getLogger("contextd")

OPEN_TENANT = "default"


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_settings(request: Request) -> Settings:
    """A coroutine so that FastAPI does not hand this attribute read to the threadpool."""
    return settings_of(request)


async def get_now(request: Request) -> datetime:
    """The time by the service's clock (`app.clock`) when the request is handled."""
    clock: Clock = request.app.state.clock
    return clock()


async def get_hook_caller(request: Request) -> HookCaller:
    hook_caller: HookCaller = request.app.state.hook_caller
    return hook_caller


async def get_evaluation_runner(request: Request) -> EvaluationRunner:
    runner: EvaluationRunner = request.app.state.evaluation_runner
    return runner


async def set_wait_budget(request: Request) -> None:
    """Give the request one database timeout to spend waiting on the database in all
    (`spend_at_most`): set once per request, however many dependencies ask for it."""
    spend_at_most(answer_deadline(settings_of(request)))


WaitBudgetSet = Annotated[None, Depends(set_wait_budget)]


async def get_db(request: Request, _budget: WaitBudgetSet) -> AsyncIterator[Session]:
    """A session per request, made on the event loop (no I/O until a statement runs). Closing
    it does I/O only while it still holds a transaction (a handler that did not commit, or
    failed): that close runs in a worker thread of the after-answer limiter, never on the loop,
    and never raises."""
    db: Session = request.app.state.session_factory()
    try:
        yield db
    finally:
        if db.in_transaction():
            # It may hold a session's locks: never behind the handlers' threads.
            limiter = after_answer_limiter(request.scope)
            await anyio.to_thread.run_sync(_close_quietly, db, limiter=limiter)
        else:
            db.close()


def _close_quietly(db: Session) -> None:
    """Close `db`, discarding its connection if the rollback fails.

    The close runs after the answer has been sent (or while a handler's own error is on its
    way to becoming one): an error raised here would reach the server after the response
    started, and the server would then cut the connection, and with it the next request
    already in flight on it. So it is logged and counted instead.
    """
    try:
        db.close()
    except SQLAlchemyError as exc:
        AFTER_ANSWER_FAILURES.labels("close_session").inc()
        log.warning("the request's database session did not close: %s", type(exc).__name__)
        db.invalidate()


BEARER = HTTPBearer(
    scheme_name="bearer",
    description="An API key as `Authorization: Bearer <key>`. A service with no key configured "
    "is open: every request then belongs to the `default` tenant.",
    auto_error=False,
)
"""Declares the scheme in the contract; `_resolve_tenant` reads and checks the header itself,
so that a refusal carries the service's error body and its RFC 6750 challenge."""


async def get_tenant(
    request: Request,
    _budget: WaitBudgetSet,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
) -> int:
    """The caller's tenant: from this process's cache on the event loop when it is there,
    otherwise resolved (and any refusal raised) in the threadpool, in a database session of
    its own (so a handler that needs none opens none)."""
    cached = _cached_tenant(request)
    if cached is not None:
        return cached
    return await run_in_threadpool(_resolve_tenant_in_a_session_of_its_own, request)


def _resolve_tenant_in_a_session_of_its_own(request: Request) -> int:
    with request.app.state.session_factory() as db:
        return _resolve_tenant(request, db)


class TenantCache:
    """Tenants by key hash, each remembered for `ttl` seconds, so that a revoked key stops
    working in every process within that time. Shared by the event loop and the threadpool."""

    def __init__(self, ttl: float) -> None:
        self._entries: TTLCache[str, int] = TTLCache(maxsize=10_000, ttl=ttl)
        self._lock = threading.Lock()

    def get(self, key_hash: str) -> int | None:
        with self._lock:
            return self._entries.get(key_hash)

    def put(self, key_hash: str, tenant: int) -> None:
        with self._lock:
            self._entries[key_hash] = tenant


def _cached_tenant(request: Request) -> int | None:
    """The tenant this process already resolved for the request's key, without I/O; None when
    it must be resolved (or refused) by `_resolve_tenant`."""
    state = request.app.state
    known: TenantCache = state.tenant_by_key_hash
    header = request.headers.get("authorization")
    if header is None:
        recently_open = (
            not settings_of(request).api_keys
            and not state.keys_exist
            and time.monotonic() < state.open_mode_checked_at + OPEN_MODE_RECHECK_SECONDS
        )
        return known.get("") if recently_open else None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return known.get(hash_api_key(key.strip()))


def _resolve_tenant(request: Request, db: Session) -> int:
    settings = settings_of(request)
    known: TenantCache = request.app.state.tenant_by_key_hash
    header = request.headers.get("authorization")
    if header is None:
        if settings.api_keys or _has_stored_keys(request, db):
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        return _resolve(db, known, cache_key="", tenant_name=OPEN_TENANT)
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        raise refused_scheme(header)
    if not key.strip():
        raise Unauthorized(
            "malformed Authorization header: expected 'Bearer <key>'", error="invalid_request"
        )
    key_hash = hash_api_key(key.strip())
    cached = known.get(key_hash)
    if cached is not None:
        return cached
    for pair in settings.api_keys:
        tenant_name, _, static_key = pair.partition(":")
        if hmac.compare_digest(hash_api_key(static_key), key_hash):
            return _resolve(db, known, cache_key=key_hash, tenant_name=tenant_name)
    tenant = tenancy.tenant_of_key(db, key_hash)
    if tenant is None:
        if not settings.api_keys and not _has_stored_keys(request, db):
            raise Unauthorized(
                "unknown API key: this service has no keys (it serves without one, as tenant "
                f"{OPEN_TENANT!r}); send no Authorization header, or create a key with "
                "`contextd create-key`",
                error="invalid_token",
            )
        raise Unauthorized("unknown API key", error="invalid_token")
    known.put(key_hash, tenant)
    return tenant


OPEN_MODE_RECHECK_SECONDS = 2.0

KNOWN_SCHEMES = frozenset(
    scheme.lower()
    for scheme in (
        "Basic",
        "Digest",
        "Negotiate",
        "NTLM",
        "HOBA",
        "Mutual",
        "SCRAM-SHA-1",
        "SCRAM-SHA-256",
        "vapid",
        "DPoP",
        "GNAP",
        "PrivateToken",
        "Concealed",
        "OAuth",
        "AWS4-HMAC-SHA256",
        "Token",
    )
)
"""Authentication schemes (IANA's registry, and a few in common use) a refusal may name: any
other first word of an Authorization header may be the credential itself, and is never echoed."""


def refused_scheme(header: str, *, expected: str = "'Bearer <key>'") -> Unauthorized:
    """The 401 for an Authorization header that is not a bearer token. A header with no
    scheme at all (`Authorization: <key>`) is malformed (RFC 6750's `invalid_request`); one in
    another scheme gets no error code (section 3.1: no bearer credentials were sent). Only a
    known scheme's name is repeated back."""
    scheme, space, _ = header.strip().partition(" ")
    if not space:
        return Unauthorized(
            f"malformed Authorization header: no scheme; expected {expected}",
            error="invalid_request",
        )
    named = f"the {scheme} scheme" if scheme.lower() in KNOWN_SCHEMES else "this scheme"
    return Unauthorized(f"{named} is not accepted: send {expected}")


def _has_stored_keys(request: Request, db: Session) -> bool:
    """Whether any key exists in the database, re-read at most every couple of seconds.

    Once a key exists the service is closed for good (a revoked key is kept); while it is
    open, a key created with the CLI closes it within `OPEN_MODE_RECHECK_SECONDS`.
    """
    state = request.app.state
    now = time.monotonic()
    if state.keys_exist or now < state.open_mode_checked_at + OPEN_MODE_RECHECK_SECONDS:
        return bool(state.keys_exist)
    state.keys_exist = tenancy.keys_exist(db)
    state.open_mode_checked_at = now
    return bool(state.keys_exist)


def _resolve(db: Session, known: TenantCache, *, cache_key: str, tenant_name: str) -> int:
    tenant = known.get(cache_key)
    if tenant is None:
        tenant = tenancy.tenant_named(db, tenant_name)
        known.put(cache_key, tenant)
    return tenant


async def get_raw_body(request: Request) -> bytes:
    """The request body as received; Starlette caches it, so this does not read it twice."""
    return await request.body()


async def get_json_body(request: Request) -> Any:
    """The request body as the route parsed it (`app.api.json_body`): the value its model was
    checked from, not parsed again; None when the route parsed none."""
    return parsed_body(request)


Db = Annotated[Session, Depends(get_db)]
RawBody = Annotated[bytes, Depends(get_raw_body)]
JsonBody = Annotated[Any, Depends(get_json_body)]
TenantId = Annotated[int, Depends(get_tenant)]
AppSettings = Annotated[Settings, Depends(get_settings)]
Hooks = Annotated[HookCaller, Depends(get_hook_caller)]
EvaluationJobs = Annotated[EvaluationRunner, Depends(get_evaluation_runner)]
Now = Annotated[datetime, Depends(get_now)]
