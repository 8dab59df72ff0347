"""One JSON codec for the service: orjson, and the standard library where orjson would change
a value.

Every number survives a round trip exactly. orjson refuses to encode an integer beyond 64 bits
(`encode_json` then takes the standard library), and reads an integer literal beyond them as
the nearest float: `decode_json` reads again, with the standard library, any document in which
orjson produced a float outside ±2**63, the only place such a float can come from (a float
literal there is read the same by both).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import orjson

MAX_NESTING = 254
"""orjson encodes containers nested at most this deep: no document the service writes or
answers may nest deeper (the request limit, `CTX_MAX_JSON_DEPTH`, stays well under it)."""

ROUNDED_INTEGER_BOUND = 2.0**63
"""orjson reads an integer literal as an exact int within [-2**63, 2**64); beyond, as a float."""


def encode_json(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON of `value`; keys sorted if asked (canonical form for hashing)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:
        text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
        return text.encode()


def decode_json(document: bytes | str) -> Any:
    """The value of the JSON `document`, every integer exact (orjson refuses an integer beyond
    the float range, and reads one beyond 64 bits as a float: the standard library reads both
    exactly)."""
    try:
        value = orjson.loads(document)
    except orjson.JSONDecodeError:
        return json.loads(document)
    if is_plain(value, max_depth=MAX_NESTING):
        return value
    return json.loads(document)


def is_plain(value: Any, *, max_depth: int) -> bool:
    """Whether `value` nests at most `max_depth` containers deep (a scalar: 0) and every float
    in it lies strictly within ±2**63: finite, and read by orjson exactly as written.

    The check every request body and stored document goes through, so it only looks at types
    (a body of thousands of candidates is walked in a fraction of its parse time).
    """
    return _nests_plainly([value], max_depth + 1)


def _nests_plainly(container: dict[str, Any] | list[Any], levels: int) -> bool:
    if levels < 1:
        return False
    values: Iterable[Any] = container.values() if isinstance(container, dict) else container
    for inner in values:
        kind = type(inner)
        if kind is dict or kind is list:
            if not _nests_plainly(inner, levels - 1):
                return False
        elif kind is float and not -ROUNDED_INTEGER_BOUND < inner < ROUNDED_INTEGER_BOUND:
            return False
    return True
