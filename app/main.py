"""Application factory. Nothing connects to anything at import time: the engine is created
lazily by `create_app` and no query runs until a request needs one."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.to_thread
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import Message, Scope

from app.api import (
    assembly,
    compaction,
    evaluation,
    history,
    isolation,
    manifests,
    ops,
    projection,
    recall,
    sessions,
    world,
)
from app.api.deps import TenantCache
from app.api.errors import install_error_handlers
from app.api.links import install_links
from app.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from app.clock import Clock, system_clock
from app.hooks import HookCaller
from app.settings import Settings
from app.storage.caches import ProcessCaches
from app.storage.database import (
    create_db_engine,
    create_session_factory,
    engine_capacity,
)
from app.storage.loop_pool import create_loop_pool
from app.storage.retention import prune_periodically
from app.tokens import token_counter
from app.tracing import instrument, telemetry_config
from app.usecases.checkpointing import checkpoint_kept_folds
from app.usecases.evaluation_jobs import EvaluationRunner


def _operation_id(route: APIRoute) -> str:
    return route.name


YOUNG_GENERATION_THRESHOLD = 50_000
"""Allocations between collections of the youngest generation (Python's default: 700). One
assembly of 500 candidates allocates thousands of short-lived containers, nearly all freed by
reference counting, so frequent young collections cost time and give no memory back."""


async def _route_once(app: FastAPI) -> None:
    """Route one request that matches no route, straight to the router (no middleware, so no
    metric counts it): FastAPI builds each included router's matching tables on the first
    request that reaches it, 40 to 80 ms that the first caller after a restart would
    otherwise wait for (`docs/performance.md`)."""
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/.contextd-warm-up",
        "raw_path": b"/.contextd-warm-up",
        "root_path": "",
        "query_string": b"",
        "headers": [],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: Message) -> None:
        return None

    await app.router(scope, receive, send)


def _settle_heap() -> None:
    """Freeze what startup loaded (encodings, schemas, mappers), so that a full collection
    scans only objects made since: collecting them again on every full collection is what
    made `/assemble`'s tail latency (the README's performance section has the figures)."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, oldest)


def create_app(settings: Settings | None = None, *, clock: Clock = system_clock) -> FastAPI:
    """The service on `settings` (default: from the environment), reading the time from
    `clock`."""
    settings = settings or Settings()
    engine = create_db_engine(settings)
    instrument(engine)
    caches = ProcessCaches(
        fold_bytes=settings.fold_cache_bytes, checkpoints=settings.checkpoint_every_facts > 0
    )
    session_factory = create_session_factory(engine, caches)
    loop_pool = create_loop_pool(engine, settings)
    evaluation_runner = EvaluationRunner(settings, session_factory, clock)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Load the default encoding's BPE ranks now, not during the first caller's request.
        await asyncio.to_thread(token_counter, settings.default_encoding)
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
        await _route_once(_app)
        _settle_heap()
        if loop_pool is not None:
            await loop_pool.open()
        retention = asyncio.create_task(prune_periodically(session_factory, settings))
        yield
        # Before the connections close: the next process reads these, not the whole logs.
        await asyncio.to_thread(
            checkpoint_kept_folds,
            session_factory,
            every=settings.checkpoint_every_facts,
            from_facts=settings.checkpoint_from_facts,
            now=clock(),
            seconds=settings.shutdown_checkpoint_seconds,
        )
        retention.cancel()
        with suppress(asyncio.CancelledError):
            await retention
        await asyncio.to_thread(evaluation_runner.close)
        if loop_pool is not None:
            await loop_pool.close()
        engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="contextd",
        version="0.1.0",
        summary="Decides what an LLM agent sees on each model call.",
        generate_unique_id_function=_operation_id,
        # A body sent without a content type is read as JSON (curl -d, many HTTP clients); one
        # that names another type is refused by `JsonRoute` with a 415 that says so.
        strict_content_type=False,
        # A span per request, exported when the OTEL_* variables ask (app.tracing).
        telemetry=telemetry_config(),
    )
    app.state.settings = settings
    app.state.clock = clock
    app.state.engine = engine
    app.state.session_factory = session_factory
    app.state.caches = caches
    app.state.loop_pool = loop_pool
    app.state.after_answer_limiter = anyio.CapacityLimiter(engine_capacity(settings))
    app.state.hook_caller = HookCaller(settings)
    app.state.evaluation_runner = evaluation_runner
    app.state.tenant_by_key_hash = TenantCache(ttl=settings.api_key_cache_seconds)
    app.state.keys_exist = False
    app.state.open_mode_checked_at = float("-inf")
    app.include_router(ops.router)
    app.include_router(sessions.router)
    app.include_router(projection.router)
    app.include_router(recall.router)
    app.include_router(evaluation.router)
    app.include_router(evaluation.job_router)
    app.include_router(history.router)
    app.include_router(assembly.router)
    app.include_router(world.router)
    app.include_router(compaction.router)
    app.include_router(isolation.router)
    app.include_router(manifests.router)
    install_error_handlers(app)
    install_links(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        deadline_seconds=settings.body_timeout_seconds,
    )
    app.add_middleware(MetricsMiddleware)
    return app


def __getattr__(name: str) -> FastAPI:
    # `app.main:app` for any ASGI server, built on first access rather than at import.
    if name == "app":
        application = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
