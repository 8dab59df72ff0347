"""Tenants and their API keys (stored as hashes). None of these commits: the caller owns the
transaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import exists, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.storage.tables import ApiKey, Tenant


def _now() -> datetime:
    return datetime.now(UTC)


def ensure_tenant(db: Session, name: str) -> int:
    tenant_id = db.scalar(select(Tenant.id).where(Tenant.name == name))
    if tenant_id is not None:
        return tenant_id
    try:
        with db.begin_nested():
            tenant = Tenant(name=name, created_at=_now())
            db.add(tenant)
    except IntegrityError:
        # Another request created it between our read and our insert.
        return db.scalars(select(Tenant.id).where(Tenant.name == name)).one()
    return tenant.id


def add_api_key(db: Session, *, tenant_id: int, key_hash: str) -> int:
    key = ApiKey(tenant_id=tenant_id, key_hash=key_hash, created_at=_now())
    db.add(key)
    db.flush()
    return key.id


def find_tenant_by_key_hash(db: Session, key_hash: str) -> int | None:
    """The tenant of a key that is not revoked."""
    return db.scalar(
        select(ApiKey.tenant_id).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
    )


class KeyListing(NamedTuple):
    id: int
    tenant: str
    fingerprint: str
    """The first 12 hex digits of the key's SHA-256: enough to tell keys apart, useless to use."""
    created_at: datetime
    revoked_at: datetime | None


def list_api_keys(db: Session, *, tenant: str | None = None) -> list[KeyListing]:
    query = (
        select(ApiKey.id, Tenant.name, ApiKey.key_hash, ApiKey.created_at, ApiKey.revoked_at)
        .join(Tenant, Tenant.id == ApiKey.tenant_id)
        .order_by(ApiKey.id)
    )
    if tenant is not None:
        query = query.where(Tenant.name == tenant)
    return [
        KeyListing(key_id, name, key_hash[:12], created, revoked)
        for key_id, name, key_hash, created, revoked in db.execute(query)
    ]


def revoke_api_key(db: Session, key_id: int) -> KeyListing | None:
    """Revokes key `key_id` (again: no change); None when there is no such key."""
    key = db.get(ApiKey, key_id)
    if key is None:
        return None
    if key.revoked_at is None:
        key.revoked_at = _now()
        db.flush()
    listed = list_api_keys(db)
    return next(entry for entry in listed if entry.id == key_id)


def has_api_keys(db: Session) -> bool:
    return bool(db.scalar(select(exists().where(ApiKey.id.is_not(None)))))
