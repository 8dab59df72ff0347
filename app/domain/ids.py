"""Identifiers the service synthesizes. Every one is derived (UUIDv5), never random, so the
same input yields the same id in every process."""

from __future__ import annotations

import hashlib
import uuid

CONTEXTD_NAMESPACE = uuid.UUID("6f1c1f3e-3f43-5a8e-9b6a-2c7d0c5e9a41")


def derive_id(prefix: str, *parts: object) -> str:
    """`prefix_<uuid5>` over the parts joined by '/'."""
    name = "/".join(str(part) for part in (prefix, *parts))
    return f"{prefix}_{uuid.uuid5(CONTEXTD_NAMESPACE, name)}"


def hash_api_key(key: str) -> str:
    """What the service keeps of an API key: its SHA-256, hex (the key itself is never stored)."""
    return hashlib.sha256(key.encode()).hexdigest()
