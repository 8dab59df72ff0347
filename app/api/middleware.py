"""ASGI middleware: request body limit and deadline, and per-route request metrics.

Both are plain ASGI (not BaseHTTPMiddleware) so a 32 MiB body is streamed once, not copied.
"""

from __future__ import annotations

import time

import anyio
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.metrics import HTTP_LATENCY, HTTP_REQUESTS
from app.tracing import exemplar


class BodyLimitMiddleware:
    """Refuses bodies over `max_bytes` with 413, by Content-Length or while streaming, and
    bodies not whole within `deadline_seconds` of the request's start with 408.

    The deadline is one for the whole body, not per chunk: a client trickling a byte at a time
    holds its socket and buffers no longer than one that sends nothing. A 408 asks the server
    to close the connection (`Connection: close`): the rest of the body would otherwise be
    read as the next request. Once the body is whole, `receive` is not bounded (it then only
    waits for the client to go away)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, deadline_seconds: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.deadline_seconds = deadline_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"the request body exceeds the limit of {self.max_bytes} bytes"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, "payload_too_large", message)(scope, receive, send)
            return
        seen = 0
        whole = False
        deadline = anyio.current_time() + self.deadline_seconds

        async def limited_receive() -> Message:
            nonlocal seen, whole
            if whole:
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()) as waiting:
                received = await receive()
            if waiting.cancelled_caught:
                # An HTTPException: FastAPI turns anything else raised while it reads the
                # body into a bare 400.
                raise HTTPException(
                    408,
                    f"the request body did not arrive whole within {self.deadline_seconds:g} s",
                    headers={"Connection": "close"},
                )
            whole = received["type"] != "http.request" or not received.get("more_body", False)
            seen += len(received.get("body", b""))
            if seen > self.max_bytes:
                raise HTTPException(413, message)
            return received

        await self.app(scope, limited_receive, send)


class MetricsMiddleware:
    """Counts and times every request under its route template (bounded label values), and
    reports the server time in a `Server-Timing` header. When tracing, a latency's exemplar
    names the request's trace."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # Server time up to the first response byte, for curl users and benchmarks.
                elapsed_ms = (time.perf_counter() - started) * 1000
                headers = [
                    *message.get("headers", []),
                    (b"server-timing", f"app;dur={elapsed_ms:.3f}".encode()),
                ]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope["method"]
            HTTP_LATENCY.labels(method, template).observe(
                time.perf_counter() - started, exemplar=exemplar()
            )
            HTTP_REQUESTS.labels(method, template, str(status)).inc()
