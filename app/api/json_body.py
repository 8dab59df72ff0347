"""Request bodies are parsed by orjson, for every route.

orjson parses UTF-8 JSON several times faster than the standard library and refuses what no
provider, database or response encoder accepts: a lone UTF-16 surrogate escape (`"\\ud800"`).
A body orjson refuses is parsed again by the standard library, which reads UTF-16 and UTF-32
bodies and the `NaN` and `Infinity` tokens (the models then refuse non-finite numbers with a
422); whatever it accepts must still be valid Unicode. Every refusal is a `JSONDecodeError`,
which FastAPI reports as `json_invalid` and the error handlers as a 400 with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

LONE_SURROGATE = "text contains a lone UTF-16 surrogate; send valid Unicode"


def parse_json(body: bytes) -> Any:
    """The JSON value of `body`; raises `json.JSONDecodeError` (orjson's is a subclass)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        value = json.loads(body)
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "surrogates not allowed" in str(exc):
            raise json.JSONDecodeError(LONE_SURROGATE, body.decode(errors="replace"), 0) from exc
        raise
    return value


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class JsonRoute(APIRoute):
    """An `APIRoute` whose handler parses JSON bodies with `parse_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_with_orjson(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return parse_with_orjson
