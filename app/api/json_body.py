"""Request bodies are parsed by orjson, for every route, and kept exactly as sent or refused.

orjson parses UTF-8 JSON several times faster than the standard library and refuses what no
provider, database or response encoder accepts: a lone UTF-16 surrogate escape (`"\\ud800"`).
A body orjson refuses, or in which it may have rounded an integer beyond 64 bits (see
`app.domain.json_encoding`), is parsed again by the standard library, which keeps every
integer exact and also reads UTF-16 and UTF-32 bodies. Invariants of every body a handler sees:

- it nests at most `CTX_MAX_JSON_DEPTH` levels (the body itself is level 1), so every reader
  and encoder in the service can handle whatever was accepted; deeper is a 422 naming where;
- its numbers are as sent: `NaN`, `Infinity` and literals beyond the float range (`1e400`)
  would become `null` on the way out, so they are a 422 naming where;
- its integers have at most `MAX_INTEGER_DIGITS` digits, whatever the interpreter allows: a
  longer one is a 422 naming the limit, refused before it is converted;
- its text is valid Unicode: a lone surrogate or bytes that are not UTF-8 are a 400.

Malformed JSON is a `JSONDecodeError`, which FastAPI reports as `json_invalid` and the error
handlers as a 400 with the reason and offset; a refusal is a `BodyRefused`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Literal, assert_never

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from app.domain.errors import InvalidInput
from app.domain.json_encoding import is_plain

LONE_SURROGATE = "text contains a lone UTF-16 surrogate; send valid Unicode"
_SURROGATE = re.compile("[\ud800-\udfff]")

Flaw = Literal["too_deep", "not_finite", "lone_surrogate"]
Loc = list[str | int]


class BodyRefused(InvalidInput, HTTPException):
    """Well-formed JSON refused before any model sees it: a 422 with the place in `details`.

    It is an `HTTPException` too because FastAPI lets nothing else out of body parsing (any
    other error there becomes a bare 400); the error table answers it as `InvalidInput`.
    """

    def __init__(self, message: str, *, loc: Loc, msg: str) -> None:
        InvalidInput.__init__(self, message, details=[{"loc": loc, "msg": msg}])
        HTTPException.__init__(self, status_code=422, detail=message)


def parse_json(body: bytes, *, max_depth: int) -> Any:
    """The JSON value of `body`, exactly as sent. Raises `json.JSONDecodeError` (orjson's is a
    subclass) for malformed JSON and `BodyRefused` for JSON the service does not keep."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    else:
        if is_plain(value, max_depth=max_depth):
            return value
    value = _parse_exactly(body, max_depth=max_depth)
    found = _first_flaw(value, path=["body"], levels=max_depth)
    if found is None:
        return value
    loc, flaw = found
    match flaw:
        case "too_deep":
            raise _too_deep(max_depth, loc=loc)
        case "not_finite":
            raise BodyRefused(
                "numbers must be finite JSON numbers: NaN, Infinity and numbers beyond the "
                "64-bit float range (such as 1e400) cannot be kept as sent",
                loc=loc,
                msg="not a finite number",
            )
        case "lone_surrogate":
            raise json.JSONDecodeError(LONE_SURROGATE, body.decode(errors="replace"), 0)
        case _:
            assert_never(flaw)


MAX_INTEGER_DIGITS = 4_300
"""The most digits an integer in a body may have: converting digits to an integer costs the
square of their number. It is Python's default limit (`sys.get_int_max_str_digits`), and it
holds whatever the interpreter's is: lifted there (0 turns it off), it is enforced here; set
lower there, that lower limit is the one refused and named (what it refuses no code here
could read or write)."""


def _parse_exactly(body: bytes, *, max_depth: int) -> Any:
    # Where the interpreter's own limit already bounds every conversion within the service's,
    # integers are left to it: `_bounded_int` costs a Python call for each of them.
    is_bounded = 0 < sys.get_int_max_str_digits() <= MAX_INTEGER_DIGITS
    try:
        return json.loads(body, parse_int=None if is_bounded else _bounded_int)
    except UnicodeDecodeError as exc:
        reason = f"the body is not valid {exc.encoding} at byte {exc.start}: {exc.reason}"
        raise json.JSONDecodeError(reason, body.decode(errors="replace"), exc.start) from exc
    except RecursionError as exc:
        # Far deeper than any limit the settings allow; where exactly is not worth a walk.
        raise _too_deep(max_depth, loc=["body"]) from exc
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        # The parser's one other refusal: an integer beyond the interpreter's own limit.
        raise _too_many_digits(sys.get_int_max_str_digits()) from exc


def _bounded_int(literal: str) -> int:
    """The integer `literal` (JSON's: digits, maybe after a minus) stands for, converted only
    within `MAX_INTEGER_DIGITS`."""
    if len(literal) - literal.startswith("-") > MAX_INTEGER_DIGITS:
        raise _too_many_digits(MAX_INTEGER_DIGITS)
    return int(literal)


def _too_many_digits(limit: int) -> BodyRefused:
    return BodyRefused(
        f"integers are kept exact up to {limit} digits, the limit; send a longer number as a "
        "string",
        loc=["body"],
        msg=f"an integer of more than {limit} digits",
    )


def _too_deep(max_depth: int, *, loc: Loc) -> BodyRefused:
    return BodyRefused(
        f"the request body nests deeper than {max_depth} levels, the limit",
        loc=loc,
        msg=f"nested deeper than {max_depth} levels",
    )


def _first_flaw(value: Any, *, path: Loc, levels: int) -> tuple[Loc, Flaw] | None:
    """The place and kind of the first flaw of `value` in document order, if any; `levels`: how
    many containers deep it may still nest."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, "not_finite")
    if isinstance(value, str):
        return (path, "lone_surrogate") if _SURROGATE.search(value) else None
    if not isinstance(value, dict | list):
        return None
    if levels < 1:
        return path, "too_deep"
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, inner in pairs:
        if isinstance(key, str) and _SURROGATE.search(key):
            return [*path, key], "lone_surrogate"
        found = _first_flaw(inner, path=[*path, key], levels=levels - 1)
        if found is not None:
            return found
    return None


class OrjsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            max_depth: int = self.app.state.settings.max_json_depth
            self._json = parse_json(await self.body(), max_depth=max_depth)
        return self._json


def parsed_body(request: Request) -> Any:
    """The value `request.json()` parsed (Starlette's requests keep it too), not parsed again;
    None when nothing parsed the body (none was sent, say)."""
    return getattr(request, "_json", None)


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or media_type.endswith("+json")


class JsonRoute(APIRoute):
    """An `APIRoute` whose handler parses JSON bodies with `parse_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parse_with_orjson(request: Request) -> Response:
            declared = request.headers.get("content-type", "")
            media = declared.partition(";")[0].strip().lower()
            if self.body_field is not None and media and not _is_json(media):
                raise HTTPException(
                    status_code=415,
                    detail=f"the body is declared {media!r}; send it as application/json",
                )
            return await handler(OrjsonRequest(request.scope, request.receive))

        return parse_with_orjson
