"""Manifests: a tenant's named, versioned documents of what an agent's context holds
(`app.usecases.manifests`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api.deps import Db, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.common import ManifestName
from app.contract.isolation import ManifestRequest, ManifestResponse, ManifestVersionResponse
from app.usecases import manifests

router = APIRouter(
    route_class=JsonRoute, tags=["isolation and manifests"], responses=ERROR_RESPONSES
)


@router.put(
    "/manifests/{name}",
    response_model=ManifestVersionResponse,
    responses=rule_responses("manifest_inconsistent", "unstorable_value"),
)
def put_manifest(
    name: Annotated[ManifestName, Path()], body: ManifestRequest, tenant_id: TenantId, db: Db
) -> ManifestVersionResponse:
    return manifests.put_manifest(db, tenant_id=tenant_id, name=name, body=body)


@router.get("/manifests/{name}", response_model=ManifestResponse)
def get_manifest(name: str, tenant_id: TenantId, db: Db) -> ManifestResponse:
    return manifests.get_manifest(db, tenant_id=tenant_id, name=name)
