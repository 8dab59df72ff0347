"""What two assemblies of one session state must answer alike, whichever process or fold made
them."""

from __future__ import annotations

from typing import Any

import orjson

VARYING = ("assembly_id", "cache", "prompt_cache_key")
"""What two calls on the same state may answer differently: the assembly's own id, the prefix
reuse against the previous call of the lineage (which differs by who asked last), and the
advice's `cache` (the seconds since that call)."""


def decisions(answer: dict[str, Any]) -> bytes:
    """`answer` without what may vary between two calls on one state, as JSON bytes."""
    kept = {key: value for key, value in answer.items() if key not in VARYING}
    kept["advice"] = {key: value for key, value in answer["advice"].items() if key != "cache"}
    return orjson.dumps(kept)
