"""Who is asking: the tenant of an API key, whether the service holds any key at all (with none,
it serves one open tenant), and a tenant by name, created on first use."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.storage import tenant_rows

__all__ = ["keys_exist", "tenant_named", "tenant_of_key"]


def tenant_of_key(db: Session, key_hash: str) -> int | None:
    """The tenant of the key whose hash is `key_hash`, unless it is unknown or revoked."""
    return tenant_rows.find_tenant_by_key_hash(db, key_hash)


def keys_exist(db: Session) -> bool:
    """Whether any API key was ever created (a revoked one counts: it closed the service)."""
    return tenant_rows.has_api_keys(db)


def tenant_named(db: Session, name: str) -> int:
    """The tenant called `name`, created (and committed) if it is new."""
    tenant = tenant_rows.ensure_tenant(db, name)
    db.commit()
    return tenant
