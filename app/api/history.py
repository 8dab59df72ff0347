"""Normalization over HTTP: stateless (`POST /history/normalize`) and the session's active
history (`GET /sessions/{id}/history`). Both write nothing.

The answers are built as plain data and sent as they are: validating megabytes of items against
the response model would repeat work the repairs already guarantee.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Response

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.json_body import JsonRoute
from app.api.responses import json_response
from app.contract.history import HistoryResponse, NormalizeRequest, NormalizeResponse
from app.domain.errors import InvalidInput
from app.domain.formats import from_responses, to_responses
from app.domain.items import Format, visible_text
from app.domain.normalize import Modality, NormalizeResult, TruncationPolicy, normalize_history
from app.metrics import record_repairs
from app.storage import repository
from app.storage.history import load_history
from app.tokens import token_counter

router = APIRouter(route_class=JsonRoute, tags=["history"], responses=ERROR_RESPONSES)

_MODALITY = "|".join(get_args(Modality))
MODALITY_LIST = f"^(({_MODALITY})(,({_MODALITY}))*)?$"
"""The `input_modalities` query: a comma-separated list of known modalities (or nothing)."""


def _body(result: NormalizeResult, *, output_format: Format, tokens: int) -> dict[str, Any]:
    rendered = from_responses(list(result.items), output_format)
    conversion = rendered.report()
    report = result.report.as_dict()
    report["excluded"] = [*report["excluded"], *conversion["excluded"]]
    report["dropped_fields"] = conversion["dropped_fields"]
    report["placeholders"] = conversion["placeholders"]
    record_repairs(report)
    return {
        "items": rendered.items,
        "system": rendered.system,
        "tokens": tokens,
        "report": report,
        "untranslated": rendered.untranslated,
    }


@router.post("/history/normalize", response_model=NormalizeResponse)
def normalize(
    body: NormalizeRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> Response:
    """Repairs a history (given, or a session's active one) and reports every repair."""
    if (body.items is None) == (body.session_id is None):
        raise InvalidInput(
            "give either `items` or `session_id`, not both and not neither",
            details=[{"loc": ["body"], "msg": "exactly one of items, session_id is required"}],
        )
    truncation = TruncationPolicy(**body.truncation.model_dump())
    modalities = frozenset(body.input_modalities)
    output_format = body.output_format or body.format
    if body.session_id is not None:
        session = repository.get_session(db, tenant_id=tenant_id, external_id=body.session_id)
        loaded = load_history(
            db,
            session,
            encoding=body.encoding,
            input_modalities=modalities,
            truncation=truncation,
        )
        return json_response(
            _body(loaded.normalized, output_format=output_format, tokens=loaded.tokens)
        )
    count_tokens = token_counter(body.encoding or settings.default_encoding)
    result = normalize_history(
        to_responses(body.items or [], body.format).items,
        count_tokens=count_tokens,
        input_modalities=modalities,
        truncation=truncation,
    )
    tokens = sum(count_tokens(visible_text(item)) for item in result.items)
    return json_response(_body(result, output_format=output_format, tokens=tokens))


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
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    loaded = load_history(db, session, input_modalities=frozenset(modalities))
    body = _body(loaded.normalized, output_format=output_format, tokens=loaded.tokens)
    return json_response({**body, "compaction_id": loaded.active.compaction_id})
