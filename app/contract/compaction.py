"""The compaction router's models: a compaction (stateless or of a session), compaction
advice, the context window, and the end of a session. Field names are the contract."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.contract.assembly import AdviceCacheBody
from app.contract.common import (
    HOOK_OUTCOMES,
    WHOLE_NUMBER,
    ConversionReportBody,
    Count,
    Label,
    ProviderEstimate,
    RequestModel,
    SessionIdText,
    StrictModel,
    TokenizerBody,
    exactly_one_of,
    given,
)
from app.domain.compaction import DEFAULT_KEEP_RECENT, NotAppliedReason, Strategy, Summarizer
from app.domain.items import Format
from app.tokens import Encoding


class CompactParams(StrictModel):
    keep_recent: Annotated[int, Field(ge=0, le=10_000), WHOLE_NUMBER] = DEFAULT_KEEP_RECENT
    clear_at_least_tokens: Count = 0
    exclude_tools: list[Label] = Field(default_factory=list)
    clear_tool_inputs: bool = False
    target_tokens: Annotated[int, Field(ge=1, le=100_000_000), WHOLE_NUMBER] | None = None
    summarizer: Summarizer = "builtin"


class ClientSummary(StrictModel):
    text: Annotated[str, Field(min_length=1, max_length=1_000_000)]


class CompactRequest(RequestModel):
    """Either `session_id` (writes a compaction fact) or `items` (stateless, writes nothing)."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                exactly_one_of("session_id", "items"),
                # A client summarizer posts its summary, unless a dry run asks for the prompt.
                {
                    "if": {
                        "required": ["params"],
                        "properties": {
                            "params": {
                                "required": ["summarizer"],
                                "properties": {"summarizer": {"const": "client"}},
                            },
                            "dry_run": {"not": {"const": True}},
                        },
                    },
                    "then": given("summary"),
                },
            ]
        }
    )

    session_id: SessionIdText | None = None
    items: list[dict[str, Any]] | None = None
    format: Format = "responses"
    output_format: Format | None = None
    strategy: Strategy
    params: CompactParams = Field(default_factory=CompactParams)
    summary: ClientSummary | None = None
    goal: Annotated[str, Field(max_length=100_000)] | None = Field(
        default=None, description="Stateless mode only: the goal to pin (sessions use their own)."
    )
    dry_run: bool = False
    encoding: Encoding | None = None
    fallback: bool = Field(
        default=False,
        description="Session mode: when `strategy` finds nothing to do or frees less than "
        "`CTX_COMPACTION_MIN_GAIN`, use the strategy the session's advice recommends instead "
        "(`strategy` in the answer, `requested_strategy` the one asked for).",
    )


class WorkingSetEntry(BaseModel):
    seq: int
    reason: str


class LossCheck(BaseModel):
    missing: list[str]
    fell_back: bool


class LostIdentifier(BaseModel):
    kind: Literal["path", "command", "error"]
    text: str
    seqs: list[int] = Field(description="The covered facts that show it, where recall finds it.")


class CompactedIdentifiers(BaseModel):
    """The file paths, shell commands and error signatures of the range a compaction covered,
    and those the new history no longer lets the agent find: not visible, no item showing them
    kept verbatim, none replaced by a placeholder naming its fact (recall still reads them)."""

    found: int
    kept: int
    lost: list[LostIdentifier] = Field(description="The first 50 lost, in the order found.")
    lost_total: int


class CompactResponse(BaseModel):
    compaction_id: str | None
    strategy: str
    requested_strategy: str
    declares: dict[str, list[str]]
    tokens_before: int
    tokens_after: int
    summary: dict[str, Any] | None
    notes: dict[str, Any] | None
    working_set: list[WorkingSetEntry]
    history: list[dict[str, Any]]
    system: list[dict[str, Any]] | None = Field(
        description="Anthropic output: the history's leading system and developer messages "
        "(the re-anchored invariants) as top-level `system` text blocks."
    )
    conversion: ConversionReportBody
    loss_check: LossCheck
    target_tokens: int | None = Field(
        default=None, description="The target the strategy compacted toward (null: none)."
    )
    over_target_because: str | None = Field(
        default=None,
        description="Why `tokens_after` is over `target_tokens`, what each kept part takes; "
        "null when it is within.",
    )
    identifiers: CompactedIdentifiers | None = Field(
        default=None, description="Null when nothing was compacted."
    )
    hooks: list[dict[str, Any]] = Field(description=HOOK_OUTCOMES)
    summarization_prompt: str | None = None
    summarizer: dict[str, Any]
    noop: bool
    dry_run: bool
    applied: bool = Field(description="Whether a compaction fact was written.")
    not_applied_because: NotAppliedReason | None = Field(
        description="Why nothing was written: `dry_run`, `stateless` (items given), `noop` "
        "(nothing to compact) or `too_little_gain` (the plan frees less than "
        "`CTX_COMPACTION_MIN_GAIN` of the active history)."
    )
    recommended_strategy: str | None = Field(
        default=None,
        description="When the requested strategy found nothing to do or freed too little: the "
        "strategy the session's advice recommends now, which would (null when it is the one "
        "requested or none is advised). With `fallback`, it is the one planned.",
    )


class AdviceResponse(BaseModel):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: int | None
    recommended_strategy: str | None
    cache: AdviceCacheBody | None = Field(
        description="The compaction priced by the lineage's prompt cache."
    )
    active_tokens: int = Field(
        description="Exact tokens the pressure weighs: the history without state fragments "
        "and the pinned state (goal, its restatement, world state)."
    )
    provider_tokens_estimate: ProviderEstimate
    tokenizer: TokenizerBody


class ContextWindowResponse(BaseModel):
    """The current active context against the session's window."""

    session_id: str
    context_window: int
    usable_window: int = Field(description="Provider tokens a session-mode call may fill.")
    window_tokens: int = Field(
        description="The usable window in the session's encoding, beside the overhead: "
        "floor((usable_window - overhead_tokens) / ratio), what assembly fits."
    )
    active_tokens: int = Field(description="Exact tokens of the active context.")
    provider_tokens_estimate: ProviderEstimate
    by_source_class: dict[str, int] = Field(
        description="`active_tokens` by source class: `history` (without state fragments), "
        "`goal` (with its restatement), `world_state`."
    )
    pressure: float = Field(description="active_tokens / window_tokens, as advice weighs it.")
    tokenizer: TokenizerBody


class EndSessionRequest(RequestModel):
    conclusion: dict[str, Any] | None = Field(
        default=None, description="For a child session: the one item appended to its parent."
    )
    format: Format = "responses"


class EndSessionResponse(BaseModel):
    compaction_id: str | None
    hooks: list[dict[str, Any]] = Field(description=HOOK_OUTCOMES)
    conclusion_seq: int | None = None
