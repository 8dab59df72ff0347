"""The history router's models: a normalization (stateless or of a session) and a session's
history, with the report of what was repaired and what the output format could not carry.
Field names are the contract."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.contract.common import (
    WHOLE_NUMBER,
    DroppedFieldBody,
    PlaceholderBody,
    RequestModel,
    SessionIdText,
    StrictModel,
    exactly_one_of,
)
from app.domain.items import Format
from app.domain.normalize import Modality
from app.domain.truncation import TruncationMode
from app.tokens import Encoding


class TruncationSpec(StrictModel):
    mode: TruncationMode = "tokens"
    limit: Annotated[int, Field(ge=0, le=10_000_000), WHOLE_NUMBER] = 10_000
    serialization_margin: Annotated[float, Field(ge=1.0, le=10.0)] = 1.2


class NormalizeRequest(RequestModel):
    """Either `items` (stateless) or `session_id` (that session's active history)."""

    model_config = ConfigDict(json_schema_extra=exactly_one_of("items", "session_id"))

    items: list[dict[str, Any]] | None = None
    session_id: SessionIdText | None = None
    format: Format = "responses"
    output_format: Format | None = None
    input_modalities: list[Modality] = Field(default=["text", "image"])
    truncation: TruncationSpec = Field(default_factory=TruncationSpec)
    encoding: Encoding | None = None


class NormalizeReportBody(BaseModel):
    synthesized_outputs: list[dict[str, Any]]
    removed_orphans: list[dict[str, Any]]
    reordered_outputs: list[dict[str, Any]]
    deduplicated_outputs: list[dict[str, Any]]
    stripped_media: list[dict[str, Any]]
    truncated_outputs: list[dict[str, Any]]
    excluded: list[dict[str, Any]] = Field(
        description="Items kept out: by admission (`index` in the input) and by the output "
        "format (`foreign_reasoning`, `not_expressible`: `index` in the normalized list)."
    )
    dropped_fields: list[DroppedFieldBody]
    placeholders: list[PlaceholderBody]


class NormalizeResponse(BaseModel):
    items: list[dict[str, Any]]
    system: list[dict[str, Any]] | None = Field(
        description="Anthropic output: the leading system and developer messages as the "
        "top-level `system` text blocks to send. Null for `chat` and `responses`, which keep "
        "them as messages."
    )
    tokens: int = Field(description="Exact tokens of the returned items' model-visible text.")
    report: NormalizeReportBody
    untranslated: list[int] = Field(
        description="Indices of normalized Responses-form items the output format cannot "
        "carry; they are left out and listed in `report.excluded`."
    )


class HistoryResponse(NormalizeResponse):
    compaction_id: str | None
