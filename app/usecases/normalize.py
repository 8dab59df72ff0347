"""Normalization: a history repaired so that every provider accepts it, and every repair
reported. Writes nothing.

The answers are built as plain data and sent as they are: validating megabytes of items against
the response model would repeat work the repairs already guarantee.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.contract.history import NormalizeRequest
from app.domain.errors import InvalidInput
from app.domain.formats import from_responses, to_responses
from app.domain.items import Format, item_tokens
from app.domain.normalize import NormalizeResult, TruncationPolicy, normalize_history
from app.metrics import record_repairs
from app.settings import Settings
from app.storage import session_rows
from app.tokens import token_counter
from app.usecases.loaded_history import load_history

__all__ = ["active_history", "normalize", "normalized_answer"]


def normalize(
    db: Session, *, tenant_id: int, body: NormalizeRequest, settings: Settings
) -> dict[str, Any]:
    """`POST /history/normalize`: a history (given, or a session's active one) repaired, and
    every repair reported."""
    if (body.items is None) == (body.session_id is None):
        raise InvalidInput(
            "give either `items` or `session_id`, not both and not neither",
            details=[{"loc": ["body"], "msg": "exactly one of items, session_id is required"}],
        )
    truncation = TruncationPolicy(**body.truncation.model_dump())
    modalities = frozenset(body.input_modalities)
    output_format = body.output_format or body.format
    if body.session_id is not None:
        session = session_rows.get_session(db, tenant_id=tenant_id, external_id=body.session_id)
        loaded = load_history(
            db,
            session,
            encoding=body.encoding,
            input_modalities=modalities,
            truncation=truncation,
        )
        return normalized_answer(
            loaded.normalized, output_format=output_format, tokens=loaded.tokens
        )
    count_tokens = token_counter(body.encoding or settings.default_encoding)
    result = normalize_history(
        to_responses(body.items or [], body.format).items,
        count_tokens=count_tokens,
        input_modalities=modalities,
        truncation=truncation,
    )
    tokens = sum(item_tokens(item, count_tokens) for item in result.items)
    return normalized_answer(result, output_format=output_format, tokens=tokens)


def active_history(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    input_modalities: frozenset[str],
    output_format: Format,
) -> dict[str, Any]:
    """`GET /sessions/{id}/history`: the session's active history normalized for a model that
    reads `input_modalities`, in `output_format`, with the compaction it starts from."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    loaded = load_history(db, session, input_modalities=input_modalities)
    body = normalized_answer(loaded.normalized, output_format=output_format, tokens=loaded.tokens)
    return {**body, "compaction_id": loaded.active.compaction_id}


def normalized_answer(
    result: NormalizeResult, *, output_format: Format, tokens: int
) -> dict[str, Any]:
    """A normalized history as the answer's JSON-ready data, in `output_format`, with the
    repairs normalization and the conversion made (counted in the metrics)."""
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
