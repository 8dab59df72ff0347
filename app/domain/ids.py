"""Identifiers the service synthesizes. Every one is derived (UUIDv5, or a hash), never random,
so the same input yields the same id in every process."""

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


DERIVED_SESSION_KEYS_FROM = 2**62
"""Session row ids from here up (to 2**63 - 1) are derived (`session_key`); those below were
drawn from the sessions' sequence before keys were derived, and keep their ids."""


def session_key(tenant_id: int, external_id: str) -> int:
    """The row id of the tenant's session `external_id`: 62 bits of the MD5 of
    `<tenant_id>/<external_id>` (its first 8 bytes, big-endian) above `DERIVED_SESSION_KEYS_FROM`.
    A lookup by name carries it, so a database sharded on the session key routes the lookup to
    one shard. The database computes the same value (`contextd_session_key`, see migration
    20261205_0011); two names sharing a key are refused at creation, never merged."""
    digest = hashlib.md5(f"{tenant_id}/{external_id}".encode(), usedforsecurity=False).digest()
    return DERIVED_SESSION_KEYS_FROM | (
        int.from_bytes(digest[:8], "big") & (DERIVED_SESSION_KEYS_FROM - 1)
    )


def stateless_session_key(tenant_id: int) -> int:
    """The session key of a tenant's stateless assemblies: the tenant id negated, so that no
    session's key (always positive) equals it and each tenant's stateless plans share a shard
    of their own rather than every tenant's sharing one."""
    return -tenant_id
