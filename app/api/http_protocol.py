"""The HTTP/1.1 protocol `contextd serve` speaks: uvicorn's (httptools), with the head of every
request bounded as its body is (`app.api.middleware`).

Invariants, per connection:

- a request's head (request line and headers) holds at most `CTX_MAX_HEADER_BYTES`; past that
  the request is answered 431 and the connection closed, before more of it is read or kept;
- a request's head arrives whole within `CTX_HEADER_TIMEOUT_SECONDS` of the connection being
  made, or of the previous response's end; else it is answered 408 and the connection closed.
  A client that trickles its headers (or opens a connection and sends nothing) holds a socket
  and a few kilobytes for that long at most.

Both answers carry the service's error shape. The ASGI application never sees such a request.
"""

from __future__ import annotations

import asyncio
import functools
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.domain.json_encoding import encode_json
from app.settings import Settings

__all__ = ["BoundedHttpProtocol"]


@functools.cache
def _bounds() -> tuple[int, float]:
    """This process's head bounds, from its environment (as `app.main:app` reads its settings)."""
    settings = Settings()
    return settings.max_header_bytes, settings.header_timeout_seconds


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with every request's head bounded in size and in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_head, self._head_seconds = _bounds()
        self._head_bytes = 0
        """Bytes read of the head under way (or, between requests, of the next one)."""
        self._head_done = False
        """Whether the head of the request the parser is in has ended."""
        self._between = True
        """Whether the connection waits for a request (made, or its last response sent):
        what arrives then is the next request's head."""
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_done and not self._between:
            super().data_received(data)
            return
        room = self._max_head - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Only what may still be head is read as head: the rest, if the head ends in it, is the
        # body (or the next request).
        self._head_bytes = self._max_head
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if not self._head_done or self._between:
            self._refuse(
                431,
                "headers_too_large",
                f"the request line and headers exceed {self._max_head} bytes"
                " (CTX_MAX_HEADER_BYTES)",
            )
            return
        super().data_received(data[room:])

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_done, self._between = False, False

    def on_headers_complete(self) -> None:
        self._head_done, self._head_bytes = True, 0
        self._stop_waiting()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        idle = not self.pipeline  # else the next request, read already, starts now
        super().on_response_complete()
        if idle and self._head_done and not self.transport.is_closing():
            self._between, self._head_bytes = True, 0
            self._await_head()

    def _await_head(self) -> None:
        self._stop_waiting()
        self._head_deadline = self.loop.call_later(self._head_seconds, self._head_late)

    def _stop_waiting(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if (self._between or not self._head_done) and not self.transport.is_closing():
            self._refuse(
                408,
                "request_timeout",
                f"the request's headers did not arrive within {self._head_seconds:g} s"
                " (CTX_HEADER_TIMEOUT_SECONDS)",
            )

    def _refuse(self, status: int, code: str, message: str) -> None:
        body = encode_json({"error": {"code": code, "message": message, "details": None}})
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % (status, HTTPStatus(status).phrase.encode(), len(body))
        )
        self._stop_waiting()
        self.transport.write(head + body)
        self.transport.close()
