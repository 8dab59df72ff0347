"""JSON responses encoded once, and one that finishes its work after the client has the whole
answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.domain.json_encoding import encode_json
from app.metrics import AFTER_ANSWER_FAILURES

log = logging.getLogger("contextd")


def json_response(content: Any, *, status_code: int = 200) -> Response:
    """`content` sent as JSON as it is: for responses the handler built as plain data and that
    a response model would only validate and encode a second time."""
    return Response(encode_json(content), status_code=status_code, media_type="application/json")


def after_answer_limiter(scope: Scope) -> anyio.CapacityLimiter:
    """The worker threads for work done after an answer, on a database connection the request
    still holds (a deferred plan write, a session's close): as many as the engine has
    connections, so that such work never waits for a thread — at most one per connection can
    be pending."""
    limiter: anyio.CapacityLimiter = scope["app"].state.after_answer_limiter
    return limiter


class AnswerThenFinish(Response):
    """Sends the whole body, then runs `finish`, then ends the response.

    The body goes out with its `Content-Length`, so the client has the complete answer before
    `finish` starts. The server reads the connection's next request only once the response has
    ended, so a client reusing the connection always sees what `finish` wrote. `finish` runs in
    a worker thread of the after-answer limiter (`after_answer_limiter`), never of the pool the
    handlers share: work after an answer may hold locks (a plan write holds its session's), and
    must not wait for a thread that a request waiting on those locks holds. The response ends
    whatever becomes of `finish`: an error it raises is logged and counted, never passed on,
    since the server would then cut the connection after the answer (and the request in flight
    on it) instead of ending the response.
    """

    def __init__(
        self,
        content: bytes,
        *,
        finish: Callable[[], None],
        status_code: int,
        media_type: str = "application/json",
    ) -> None:
        super().__init__(content, status_code=status_code, media_type=media_type)
        self.finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        try:
            await anyio.to_thread.run_sync(self.finish, limiter=after_answer_limiter(scope))
        except Exception:
            AFTER_ANSWER_FAILURES.labels("finish").inc()
            log.exception("the work after an answer failed; the answer stands")
        await send({"type": "http.response.body", "body": b"", "more_body": False})
