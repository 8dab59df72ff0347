"""Liveness, readiness and the Prometheus scrape endpoint.

Liveness answers on the event loop and touches nothing (no database, no threadpool), so it
answers while every worker thread waits on a stalled database: a liveness probe must not
restart a process that is well. Readiness answers within the database's answer deadline,
with a 503 when the database did not answer in time, however busy the threadpool is.
"""

from __future__ import annotations

import hmac
import os

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from app.api.deps import settings_of
from app.api.errors import ERROR_RESPONSES, error_response
from app.api.json_body import JsonRoute
from app.contract.common import HealthResponse
from app.domain.errors import bearer_challenge
from app.usecases.readiness import readiness

router = APIRouter(route_class=JsonRoute, tags=["operations"])


@router.get("/healthz", response_model=HealthResponse)
async def healthz() -> HealthResponse:
    return HealthResponse(status="ok")


@router.get("/readyz", response_model=HealthResponse, responses={503: ERROR_RESPONSES[503]})
async def readyz(request: Request) -> Response | HealthResponse:
    settings = settings_of(request)
    state = await readiness(request.app.state.engine, settings)
    if state == "database_unavailable":
        return error_response(
            503,
            "database_unavailable",
            "the database is unreachable",
            headers={"Retry-After": str(settings.retry_after_seconds)},
        )
    if state == "not_migrated":
        return error_response(
            503,
            "not_migrated",
            "the database schema is not at the newest migration; run 'contextd migrate'",
        )
    return HealthResponse(status="ready")


def _metrics_refusal(header: str) -> str | None:
    """RFC 6750's error code for a refused /metrics token: `invalid_token` for a wrong bearer
    token, `invalid_request` for a header with no scheme, none when no bearer token came."""
    scheme, space, token = header.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return "invalid_token"
    return "invalid_request" if scheme and not space else None


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, 401: ERROR_RESPONSES[401]},
)
def metrics(request: Request) -> Response:
    """Prometheus text format; OpenMetrics (with exemplars) when the scraper asks for it.

    Under several workers (`PROMETHEUS_MULTIPROC_DIR` set) every worker's samples are merged,
    so any worker answers for all of them; exemplars are not kept in that mode. With
    `CTX_METRICS_TOKEN` set, the scraper must send it as a bearer token: the series name every
    tenant's units and phases.
    """
    token = settings_of(request).metrics_token
    if token is not None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        expected = token.get_secret_value().encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            return error_response(
                401,
                "unauthorized",
                "/metrics needs 'Authorization: Bearer <CTX_METRICS_TOKEN>'",
                headers={"WWW-Authenticate": bearer_challenge(_metrics_refusal(header))},
            )
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    if "application/openmetrics-text" in request.headers.get("accept", ""):
        exposition = generate_openmetrics(registry)  # type: ignore[no-untyped-call]
        return Response(exposition, media_type=OPENMETRICS_TYPE)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
