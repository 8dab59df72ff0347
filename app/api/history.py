"""Normalization over HTTP: stateless (`POST /history/normalize`) and the session's active
history (`GET /sessions/{id}/history`), through `app.usecases.normalize`. Both write nothing.
"""

from __future__ import annotations

from typing import Annotated, get_args

from fastapi import APIRouter, Query, Response

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.json_body import JsonRoute
from app.api.responses import json_response
from app.contract.history import HistoryResponse, NormalizeRequest, NormalizeResponse
from app.domain.items import Format
from app.domain.normalize import Modality
from app.usecases.normalize import active_history
from app.usecases.normalize import normalize as normalizing

router = APIRouter(route_class=JsonRoute, tags=["history"], responses=ERROR_RESPONSES)

_MODALITY = "|".join(get_args(Modality))
MODALITY_LIST = f"^(({_MODALITY})(,({_MODALITY}))*)?$"
"""The `input_modalities` query: a comma-separated list of known modalities (or nothing)."""


@router.post("/history/normalize", response_model=NormalizeResponse)
def normalize(
    body: NormalizeRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> Response:
    """Repairs a history (given, or a session's active one) and reports every repair."""
    return json_response(normalizing(db, tenant_id=tenant_id, body=body, settings=settings))


@router.get("/sessions/{session_id}/history", response_model=HistoryResponse)
def get_history(
    session_id: str,
    tenant_id: TenantId,
    db: Db,
    output_format: Format = "responses",
    input_modalities: Annotated[
        str,
        Query(
            pattern=MODALITY_LIST,
            description=f"Comma-separated, of: {', '.join(get_args(Modality))}.",
        ),
    ] = "text,image",
) -> Response:
    modalities = {m for m in input_modalities.split(",") if m}
    answer = active_history(
        db,
        tenant_id=tenant_id,
        session_id=session_id,
        input_modalities=frozenset(modalities),
        output_format=output_format,
    )
    return json_response(answer)
