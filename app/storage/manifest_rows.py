"""Manifests: each new version stored whole, the newest read back. None of these commits: the
caller owns the transaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.errors import Conflict, NotFound
from app.domain.names import is_label
from app.storage.tables import Manifest


def _now() -> datetime:
    return datetime.now(UTC)


def put_manifest(db: Session, *, tenant_id: int, name: str, document: dict[str, Any]) -> int:
    """Store a new version of a manifest and return its version number."""
    latest = db.scalar(
        select(func.max(Manifest.version)).where(
            Manifest.tenant_id == tenant_id, Manifest.name == name
        )
    )
    version = (latest or 0) + 1
    db.add(
        Manifest(
            tenant_id=tenant_id, name=name, version=version, document=document, created_at=_now()
        )
    )
    try:
        db.flush()
    except IntegrityError as exc:
        raise Conflict(f"manifest {name!r} was updated concurrently; retry") from exc
    return version


def get_manifest(db: Session, *, tenant_id: int, name: str) -> Manifest:
    if not is_label(name):
        raise NotFound(f"manifest {name!r} not found")
    row = db.scalar(
        select(Manifest)
        .where(Manifest.tenant_id == tenant_id, Manifest.name == name)
        .order_by(Manifest.version.desc())
        .limit(1)
    )
    if row is None:
        raise NotFound(f"manifest {name!r} not found")
    return row
