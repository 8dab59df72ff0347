"""One JSON encoder for the service: orjson, and the standard library for what it refuses.

orjson refuses integers beyond 64 bits, which a JSON document may carry (the stdlib fallback
parser accepts them); every other value takes the fast path.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def encode_json(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact UTF-8 JSON of `value`; keys sorted if asked (canonical form for hashing)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:
        text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
        return text.encode()
