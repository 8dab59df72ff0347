"""The sessions router's models: a session created and read (its hooks, compaction
watermarks and tokenizer), items appended and paged through, a usage report. Field names are
the contract."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, model_validator
from pydantic_core import PydanticCustomError

from app.contract.common import (
    MAX_SEQ,
    WHOLE_NUMBER,
    Count,
    Label,
    ProviderEstimate,
    RequestModel,
    SessionIdText,
    StrictModel,
    TokenizerBody,
)
from app.domain.items import Format
from app.hooks import FailurePolicy
from app.tokens import Encoding


class SessionHooks(StrictModel):
    pre_compact: HttpUrl | None = None
    session_end: HttpUrl | None = None
    failure_policy: FailurePolicy = Field(
        default="fail_open", description="What a hook timeout or error means for the compaction."
    )


class CompactionOptions(StrictModel):
    """A session's compaction watermarks, as shares of its usable window; a field left out takes
    the service's setting (`CTX_COMPACTION_HIGH_WATERMARK`, `CTX_COMPACTION_LOW_WATERMARK`)."""

    high_watermark: Annotated[float, Field(gt=0, le=1)] | None = Field(
        default=None, description="Pressure at which compaction is advised."
    )
    low_watermark: Annotated[float, Field(gt=0, lt=1)] | None = Field(
        default=None, description="Pressure a compaction brings the context down to."
    )

    @model_validator(mode="after")
    def _ordered(self) -> CompactionOptions:
        high, low = self.high_watermark, self.low_watermark
        if high is not None and low is not None and low >= high:
            raise PydanticCustomError(
                "watermarks_out_of_order",
                "low_watermark ({low}) must be below high_watermark ({high})",
                {"low": low, "high": high},
            )
        return self


class CacheOptions(StrictModel):
    """A session's prompt-cache terms where they differ from its model family's
    (`docs/prompt-cache.md`): a longer TTL bought, a negotiated price, a model's own minimum."""

    read_price: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="A cached input token's price, as a share of a fresh one's."
    )
    write_price: Annotated[float, Field(ge=0, le=10)] | None = Field(
        default=None, description="Writing a token into the cache, as a share of fresh input."
    )
    ttl_seconds: Annotated[int, Field(gt=0, le=7 * 86_400), WHOLE_NUMBER] | None = Field(
        default=None, description="How long the provider keeps an entry unused."
    )
    minimum_prefix: Annotated[int, Field(ge=0, le=1_000_000), WHOLE_NUMBER] | None = Field(
        default=None, description="The shortest prefix the provider caches, in its tokens."
    )
    block: Annotated[int, Field(ge=1, le=1_000_000), WHOLE_NUMBER] | None = Field(
        default=None, description="The granularity of a cache hit, in the provider's tokens."
    )


class CacheTermsBody(BaseModel):
    """The prompt-cache terms the session is judged by: its model family's, with its own
    `cache` overrides."""

    read_price: float
    write_price: float
    ttl_seconds: int
    minimum_prefix: int
    block: int


class CreateSessionRequest(RequestModel):
    session_id: SessionIdText | None = None
    encoding: Encoding | None = None
    context_window: Annotated[int, Field(gt=0, le=10_000_000), WHOLE_NUMBER] | None = None
    model: Label | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    hooks: SessionHooks = Field(default_factory=SessionHooks)
    compaction: CompactionOptions = Field(default_factory=CompactionOptions)
    cache: CacheOptions = Field(default_factory=CacheOptions)
    recall_tool: bool = Field(
        default=True,
        description="Whether session-mode `/assemble` offers the recall tool in `tools` (a "
        "request's own `recall_tool` overrides it).",
    )


class SessionResponse(BaseModel):
    session_id: str
    encoding: str
    context_window: int
    usable_window: int = Field(
        description="Provider tokens a session-mode call may fill (the window less the output "
        "reserve): assembly fits, and advice weighs against, floor((usable_window - "
        "overhead_tokens) / ratio) exact tokens."
    )
    model: str | None
    metadata: dict[str, Any]
    hooks: SessionHooks
    compaction: CompactionOptions
    cache: CacheTermsBody
    recall_tool: bool = Field(description="Whether assemblies offer the recall tool.")
    """The session's watermarks in effect (its own, else the service's)."""
    tokenizer: TokenizerBody
    created_at: datetime
    last_seq: int


class SessionDetailResponse(SessionResponse):
    item_count: int
    active_tokens: int
    provider_tokens_estimate: ProviderEstimate
    goal: dict[str, Any] | None
    world_state_version: int
    compactions: int


class AppendMetadata(BaseModel):
    """Provenance of a batch; unknown keys are kept with the facts."""

    model_config = ConfigDict(extra="allow", strict=True)

    harness_authored: bool = False
    truncation_token_limit: Annotated[int, Field(gt=0, le=10**9), WHOLE_NUMBER] | None = None


class AppendRequest(RequestModel):
    items: Annotated[list[dict[str, Any]], Field(min_length=1)]
    format: Format = "responses"
    expected_last_seq: Annotated[int, Field(ge=0, le=MAX_SEQ), WHOLE_NUMBER] | None = None
    idempotency_key: Label | None = None
    unit: Label | None = None
    phase: Label | None = None
    metadata: AppendMetadata = Field(default_factory=AppendMetadata)
    malformed: Literal["exclude", "refuse"] = Field(
        default="exclude",
        description="What becomes of an item of a known type whose fields no provider could "
        "take (a message without `role`, a call whose `arguments` are not text): `exclude` "
        "appends it, kept in the log and out of every context, and `excluded` says what is "
        "wrong; `refuse` answers 422 `malformed_item` naming it, and writes nothing.",
    )


class AppendedItem(BaseModel):
    seq: int
    type: str
    tokens: int


class ExcludedItem(BaseModel):
    seq: int
    type: str
    reason: str
    detail: str | None = Field(
        default=None,
        description="For a `malformed` item, what is wrong with it, in words (`message without "
        "role`, `function_call arguments is an object, not text`); null for the other reasons.",
    )


class AppendResponse(BaseModel):
    first_seq: int
    last_seq: int
    items: list[AppendedItem]
    excluded: list[ExcludedItem] = Field(
        description="Appended items kept in the log but excluded from model-visible history."
    )
    timeline: int | None = Field(
        default=None,
        description="The PostgreSQL timeline that wrote these items (a promoted standby writes "
        "on a higher one). Keep it with the seqs: an item that later reads back at one of them "
        "with another timeline is not this one (the append was lost in an asynchronous failover "
        "and its seq given again). Null on SQLite.",
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
    original: dict[str, Any] | None = Field(
        description="For an item appended as `chat` or `anthropic`: on the first item a message "
        "became, `{format, message, parts}` with the message exactly as sent; on the others, "
        "`{format, part, message_seq}`. Null for items appended as `responses` (`item` is "
        "exactly as sent)."
    )
    timeline: int | None = Field(
        description="The PostgreSQL timeline that wrote the item (see the append's "
        "`timeline`). Null on SQLite and for items written before timelines were recorded."
    )


class ItemsPageResponse(BaseModel):
    items: list[LoggedItem]
    next_after_seq: int | None


class UsageRequest(RequestModel):
    input_tokens: Count = 0
    cached_tokens: Count = 0
    output_tokens: Count = 0
    unit: Label | None = None
    phase: Label | None = None
    assembly_id: Annotated[str, Field(max_length=64)] | None = None
