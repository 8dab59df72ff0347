"""Manifests: a tenant's named, versioned documents of what an agent's context holds
(`app.domain.manifest`), checked whole before a version is written."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.contract.isolation import ManifestRequest, ManifestResponse, ManifestVersionResponse
from app.domain.manifest import manifest_from_document
from app.storage import manifest_rows

__all__ = ["get_manifest", "put_manifest"]


def put_manifest(
    db: Session, *, tenant_id: int, name: str, body: ManifestRequest
) -> ManifestVersionResponse:
    """`PUT /manifests/{name}`: the manifest's next version; an inconsistent one is a 422
    `manifest_inconsistent`, and nothing is written."""
    document = body.model_dump(mode="json")
    manifest_from_document(document)
    version = manifest_rows.put_manifest(db, tenant_id=tenant_id, name=name, document=document)
    db.commit()
    return ManifestVersionResponse(name=name, version=version)


def get_manifest(db: Session, *, tenant_id: int, name: str) -> ManifestResponse:
    """`GET /manifests/{name}`: its newest version."""
    row = manifest_rows.get_manifest(db, tenant_id=tenant_id, name=name)
    return ManifestResponse(name=name, version=row.version, **row.document)
