"""Wire models: requests end in `Request`, responses in `Response`. Field names are the contract."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

from app.domain.items import Format

SessionIdText = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:\-]+$")]
Label = Annotated[str, Field(min_length=1, max_length=200)]
Encoding = Literal["o200k_base", "cl100k_base"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionHooks(StrictModel):
    pre_compact: HttpUrl | None = None
    session_end: HttpUrl | None = None


class CreateSessionRequest(StrictModel):
    session_id: SessionIdText | None = None
    encoding: Encoding | None = None
    context_window: Annotated[int, Field(gt=0, le=10_000_000)] | None = None
    model: Label | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    hooks: SessionHooks = Field(default_factory=SessionHooks)


class SessionResponse(BaseModel):
    session_id: str
    encoding: str
    context_window: int
    model: str | None
    metadata: dict[str, Any]
    hooks: SessionHooks
    created_at: datetime
    last_seq: int


class SessionDetailResponse(SessionResponse):
    item_count: int
    active_tokens: int
    goal: dict[str, Any] | None
    world_state_version: int
    compactions: int


class AppendMetadata(BaseModel):
    """Provenance of a batch; unknown keys are kept with the facts."""

    model_config = ConfigDict(extra="allow")

    harness_authored: bool = False
    truncation_token_limit: Annotated[int, Field(gt=0)] | None = None


class AppendRequest(StrictModel):
    items: Annotated[list[dict[str, Any]], Field(min_length=1)]
    format: Format = "responses"
    expected_last_seq: Annotated[int, Field(ge=0)] | None = None
    idempotency_key: Label | None = None
    unit: Label | None = None
    phase: Label | None = None
    metadata: AppendMetadata = Field(default_factory=AppendMetadata)


class AppendedItem(BaseModel):
    seq: int
    type: str
    tokens: int


class ExcludedItem(BaseModel):
    seq: int
    type: str
    reason: str


class AppendResponse(BaseModel):
    first_seq: int
    last_seq: int
    items: list[AppendedItem]
    excluded: list[ExcludedItem] = Field(
        description="Appended items kept in the log but excluded from model-visible history."
    )


class LoggedItem(BaseModel):
    seq: int
    item: dict[str, Any]
    type: str
    recorded_at: datetime
    unit: str | None
    phase: str | None
    tokens: int
    metadata: dict[str, Any]


class ItemsPageResponse(BaseModel):
    items: list[LoggedItem]
    next_after_seq: int | None


class HealthResponse(BaseModel):
    status: str


Modality = Literal["text", "image", "audio"]


class TruncationSpec(StrictModel):
    mode: Literal["tokens", "bytes"] = "tokens"
    limit: Annotated[int, Field(ge=0, le=10_000_000)] = 10_000
    serialization_margin: Annotated[float, Field(ge=1.0, le=10.0)] = 1.2


class NormalizeRequest(StrictModel):
    """Either `items` (stateless) or `session_id` (that session's active history)."""

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
    excluded: list[dict[str, Any]]


class NormalizeResponse(BaseModel):
    items: list[dict[str, Any]]
    tokens: int = Field(description="Exact tokens of the returned items' model-visible text.")
    report: NormalizeReportBody
    untranslated: list[int] = Field(
        description="Indices of Responses-form items the output format cannot express; "
        "they are returned unchanged, in place."
    )


class HistoryResponse(NormalizeResponse):
    compaction_id: str | None
