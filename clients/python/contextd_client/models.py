# The wire models of every request and response, generated from openapi.yaml by
# `make client-models`; do not edit. Provider JSON (items, messages) stays dict[str, Any].
# ruff: noqa: E501

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AnyUrl, AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints
from typing_extensions import TypeAliasType


class AdviceCacheBody(BaseModel):
    """
    What compacting now (to the recommended strategy's product) would save and cost, given
    the lineage's prompt cache, in fresh input tokens (a fresh input token costs 1).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    state: Annotated[Literal["warm", "cold", "empty"], Field(title="State")]
    """
    `warm`: the provider still holds the lineage's prefix; `cold`: the lineage's last call came longer ago than the TTL; `empty`: no call yet, or the context is below the provider's minimum cacheable prefix.
    """
    idle_seconds: Annotated[float | None, Field(title="Idle Seconds")]
    """
    Seconds since the lineage's last call (null: it had none).
    """
    ttl_seconds: Annotated[int, Field(title="Ttl Seconds")]
    """
    The session's cache TTL (its `cache` terms).
    """
    horizon_calls: Annotated[int, Field(title="Horizon Calls")]
    """
    The calls the compaction is priced over: until the compacted context grows back to the high watermark at the recent rate per call.
    """
    reduction_tokens: Annotated[int, Field(title="Reduction Tokens")]
    """
    Tokens the compaction would take off the context.
    """
    saving: Annotated[float, Field(title="Saving")]
    """
    The reduction not sent on those calls: at the read price, or at the write price on the first call when the cache holds nothing.
    """
    cost: Annotated[float, Field(title="Cost")]
    """
    The cached prefix thrown away: the compacted context written at the write price where it would have been read at the read price (0 when the cache is not warm).
    """
    at_least_tokens: Annotated[int | None, Field(title="At Least Tokens")]
    """
    The least reduction whose saving meets the cost: a compaction that a signal alone advises is not advised below it (null: no reduction does, as when cached tokens cost nothing).
    """


TruncationTokenLimit = TypeAliasType(
    "TruncationTokenLimit",
    Annotated[int, Field(gt=0, le=1000000000, title="Truncation Token Limit")],
)


class AppendMetadata(BaseModel):
    """
    Provenance of a batch; unknown keys are kept with the facts.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    harness_authored: Annotated[bool, Field(title="Harness Authored")] = False
    truncation_token_limit: Annotated[
        TruncationTokenLimit | None, Field(title="Truncation Token Limit")
    ] = None


ExpectedLastSeq = TypeAliasType(
    "ExpectedLastSeq", Annotated[int, Field(ge=0, le=9007199254740991, title="Expected Last Seq")]
)


IdempotencyKey = TypeAliasType(
    "IdempotencyKey",
    Annotated[
        str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Idempotency Key")
    ],
)


Unit = TypeAliasType(
    "Unit", Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Unit")]
)


Phase = TypeAliasType(
    "Phase",
    Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Phase")],
)


class AppendRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[dict[str, Any]], Field(min_length=1, title="Items")]
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )
    expected_last_seq: Annotated[ExpectedLastSeq | None, Field(title="Expected Last Seq")] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    unit: Annotated[Unit | None, Field(title="Unit")] = None
    phase: Annotated[Phase | None, Field(title="Phase")] = None
    metadata: AppendMetadata | None = None
    malformed: Annotated[Literal["exclude", "refuse"], Field(title="Malformed")] = "exclude"
    """
    What becomes of an item of a known type whose fields no provider could take (a message without `role`, a call whose `arguments` are not text): `exclude` appends it, kept in the log and out of every context, and `excluded` says what is wrong; `refuse` answers 422 `malformed_item` naming it, and writes nothing.
    """


class AppendedItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    type: Annotated[str, Field(title="Type")]
    tokens: Annotated[int, Field(title="Tokens")]


SessionId = TypeAliasType(
    "SessionId",
    Annotated[
        str,
        Field(
            max_length=200,
            min_length=1,
            pattern="^(?:\\.*[A-Za-z0-9_:\\-][A-Za-z0-9._:\\-]*|\\.{3,})$",
            title="Session Id",
        ),
    ],
)
"""
Letters, digits and `._:-`; not `.` or `..`, which URL clients drop.
"""


Manifest = TypeAliasType(
    "Manifest",
    Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00/]*$", title="Manifest")],
)


Role = TypeAliasType(
    "Role", Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Role")]
)


Environment = TypeAliasType(
    "Environment",
    Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Environment")],
)


class AssembledItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    source: Annotated[str, Field(title="Source")]
    layer: Annotated[str, Field(title="Layer")]
    source_class: Annotated[str, Field(title="Source Class")]
    form: Annotated[str, Field(title="Form")]
    position: Annotated[int, Field(title="Position")]
    tokens: Annotated[int, Field(title="Tokens")]
    content: Annotated[str | None, Field(title="Content")] = None
    item: Annotated[dict[str, Any] | None, Field(title="Item")] = None


MaxItems = TypeAliasType("MaxItems", Annotated[int, Field(ge=0, le=100000000, title="Max Items")])


MaxTokens = TypeAliasType(
    "MaxTokens", Annotated[int, Field(ge=0, le=100000000, title="Max Tokens")]
)


MaxItemsPerSource = TypeAliasType(
    "MaxItemsPerSource", Annotated[int, Field(ge=0, le=100000000, title="Max Items Per Source")]
)


MaxTokensPerSource = TypeAliasType(
    "MaxTokensPerSource", Annotated[int, Field(ge=0, le=100000000, title="Max Tokens Per Source")]
)


class BudgetSpec(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    max_items: Annotated[MaxItems | None, Field(title="Max Items")] = None
    max_tokens: Annotated[MaxTokens | None, Field(title="Max Tokens")] = None
    max_items_per_source: Annotated[
        MaxItemsPerSource | None, Field(title="Max Items Per Source")
    ] = None
    max_tokens_per_source: Annotated[
        MaxTokensPerSource | None, Field(title="Max Tokens Per Source")
    ] = None


class CacheBreakpointBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    reason: Annotated[
        Literal["stable_prefix", "previous_call", "history_end"], Field(title="Reason")
    ]
    """
    `stable_prefix`: the end of the system content; `previous_call`: the last block the previous call of this session and unit shares; `history_end`: the end of the history, which the next call is expected to share.
    """
    position: Annotated[int, Field(title="Position")]
    """
    Position of the selected item the breakpoint closes.
    """
    item_id: Annotated[str, Field(title="Item Id")]
    message: Annotated[int | None, Field(title="Message")]
    """
    Index in `messages`; null: in `system`.
    """
    block: Annotated[int, Field(title="Block")]
    """
    Index of the marked block in that content list.
    """


ReadPrice = TypeAliasType("ReadPrice", Annotated[float, Field(ge=0.0, le=1.0, title="Read Price")])
"""
A cached input token's price, as a share of a fresh one's.
"""


WritePrice = TypeAliasType(
    "WritePrice", Annotated[float, Field(ge=0.0, le=10.0, title="Write Price")]
)
"""
Writing a token into the cache, as a share of fresh input.
"""


TtlSeconds = TypeAliasType(
    "TtlSeconds", Annotated[int, Field(gt=0, le=604800, title="Ttl Seconds")]
)
"""
How long the provider keeps an entry unused.
"""


MinimumPrefix = TypeAliasType(
    "MinimumPrefix", Annotated[int, Field(ge=0, le=1000000, title="Minimum Prefix")]
)
"""
The shortest prefix the provider caches, in its tokens.
"""


Block = TypeAliasType("Block", Annotated[int, Field(ge=1, le=1000000, title="Block")])
"""
The granularity of a cache hit, in the provider's tokens.
"""


class CacheOptions(BaseModel):
    """
    A session's prompt-cache terms where they differ from its model family's
    (`docs/prompt-cache.md`): a longer TTL bought, a negotiated price, a model's own minimum.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    read_price: Annotated[ReadPrice | None, Field(title="Read Price")] = None
    """
    A cached input token's price, as a share of a fresh one's.
    """
    write_price: Annotated[WritePrice | None, Field(title="Write Price")] = None
    """
    Writing a token into the cache, as a share of fresh input.
    """
    ttl_seconds: Annotated[TtlSeconds | None, Field(title="Ttl Seconds")] = None
    """
    How long the provider keeps an entry unused.
    """
    minimum_prefix: Annotated[MinimumPrefix | None, Field(title="Minimum Prefix")] = None
    """
    The shortest prefix the provider caches, in its tokens.
    """
    block: Annotated[Block | None, Field(title="Block")] = None
    """
    The granularity of a cache hit, in the provider's tokens.
    """


class CacheTermsBody(BaseModel):
    """
    The prompt-cache terms the session is judged by: its model family's, with its own
    `cache` overrides.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    read_price: Annotated[float, Field(title="Read Price")]
    write_price: Annotated[float, Field(title="Write Price")]
    ttl_seconds: Annotated[int, Field(title="Ttl Seconds")]
    minimum_prefix: Annotated[int, Field(title="Minimum Prefix")]
    block: Annotated[int, Field(title="Block")]


SourceClass = TypeAliasType(
    "SourceClass",
    Annotated[
        str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Source Class")
    ],
)


Locator = TypeAliasType(
    "Locator", Annotated[str, Field(max_length=2000, min_length=1, title="Locator")]
)


Tokens = TypeAliasType("Tokens", Annotated[int, Field(ge=0, le=1000000000000, title="Tokens")])


class CandidateSpec(BaseModel):
    """
    One candidate: `id` and exactly one of `content` and `item` (the schema's `if`);
    any other field may be left out. `source_class` defaults to the source's name.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(max_length=500, min_length=1, title="Id")]
    content: Annotated[str | None, Field(title="Content")] = None
    item: Annotated[dict[str, Any] | None, Field(title="Item")] = None
    layer: Annotated[
        Literal["prefix", "task", "recent", "memory", "retrieval"], Field(title="Layer")
    ] = "memory"
    source_class: Annotated[SourceClass | None, Field(title="Source Class")] = None
    form: Annotated[Literal["raw"], Field(title="Form")] = "raw"
    forms: Annotated[dict[Literal["skeleton", "reference"], str], Field(title="Forms")] = {}
    locator: Annotated[Locator | None, Field(title="Locator")] = None
    required: Annotated[bool, Field(title="Required")] = False
    priority: Annotated[float, Field(ge=0.0, le=1.0, title="Priority")] = 0.0
    relevance: Annotated[float, Field(ge=0.0, le=1.0, title="Relevance")] = 0.0
    trust: Annotated[float, Field(ge=0.0, le=1.0, title="Trust")] = 0.0
    freshness: Annotated[float, Field(ge=0.0, le=1.0, title="Freshness")] = 0.0
    tokens: Annotated[Tokens | None, Field(title="Tokens")] = None


class ChildSessionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[str, Field(title="Session Id")]
    parent_id: Annotated[str, Field(title="Parent Id")]
    kind: Annotated[Literal["delegate", "fork"], Field(title="Kind")]
    inherit: Annotated[dict[str, bool], Field(title="Inherit")]
    unit: Annotated[str | None, Field(title="Unit")]
    fork_seq: Annotated[int | None, Field(title="Fork Seq")]
    last_seq: Annotated[int, Field(title="Last Seq")]


class ClientSummary(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    text: Annotated[str, Field(max_length=1000000, min_length=1, title="Text")]


ExcludeTool = TypeAliasType(
    "ExcludeTool", Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$")]
)


TargetTokens = TypeAliasType(
    "TargetTokens", Annotated[int, Field(ge=1, le=100000000, title="Target Tokens")]
)


class CompactParams(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    keep_recent: Annotated[int, Field(ge=0, le=10000, title="Keep Recent")] = 3
    clear_at_least_tokens: Annotated[
        int, Field(ge=0, le=1000000000000, title="Clear At Least Tokens")
    ] = 0
    exclude_tools: Annotated[list[ExcludeTool] | None, Field(title="Exclude Tools")] = None
    clear_tool_inputs: Annotated[bool, Field(title="Clear Tool Inputs")] = False
    target_tokens: Annotated[TargetTokens | None, Field(title="Target Tokens")] = None
    summarizer: Annotated[Literal["builtin", "llm", "client"], Field(title="Summarizer")] = (
        "builtin"
    )


Goal = TypeAliasType("Goal", Annotated[str, Field(max_length=100000, title="Goal")])
"""
Stateless mode only: the goal to pin (sessions use their own).
"""


class CompactRequest(BaseModel):
    """
    Either `session_id` (writes a compaction fact) or `items` (stateless, writes nothing).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    items: Annotated[list[dict[str, Any]] | None, Field(title="Items")] = None
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )
    output_format: Annotated[
        Literal["responses", "chat", "anthropic"] | None, Field(title="Output Format")
    ] = None
    strategy: Annotated[
        Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"],
        Field(title="Strategy"),
    ]
    params: CompactParams | None = None
    summary: ClientSummary | None = None
    goal: Annotated[Goal | None, Field(title="Goal")] = None
    """
    Stateless mode only: the goal to pin (sessions use their own).
    """
    dry_run: Annotated[bool, Field(title="Dry Run")] = False
    encoding: Annotated[Literal["o200k_base", "cl100k_base"] | None, Field(title="Encoding")] = None
    fallback: Annotated[bool, Field(title="Fallback")] = False
    """
    Session mode: when `strategy` finds nothing to do or frees less than `CTX_COMPACTION_MIN_GAIN`, use the strategy the session's advice recommends instead (`strategy` in the answer, `requested_strategy` the one asked for).
    """


HighWatermark = TypeAliasType(
    "HighWatermark", Annotated[float, Field(gt=0.0, le=1.0, title="High Watermark")]
)
"""
Pressure at which compaction is advised.
"""


LowWatermark = TypeAliasType(
    "LowWatermark", Annotated[float, Field(gt=0.0, lt=1.0, title="Low Watermark")]
)
"""
Pressure a compaction brings the context down to.
"""


class CompactionOptions(BaseModel):
    """
    A session's compaction watermarks, as shares of its usable window; a field left out takes
    the service's setting (`CTX_COMPACTION_HIGH_WATERMARK`, `CTX_COMPACTION_LOW_WATERMARK`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    high_watermark: Annotated[HighWatermark | None, Field(title="High Watermark")] = None
    """
    Pressure at which compaction is advised.
    """
    low_watermark: Annotated[LowWatermark | None, Field(title="Low Watermark")] = None
    """
    Pressure a compaction brings the context down to.
    """


class ConclusionRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    conclusion: Annotated[dict[str, Any], Field(title="Conclusion")]
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )


class ConclusionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    parent_id: Annotated[str, Field(title="Parent Id")]
    seq: Annotated[int, Field(title="Seq")]


ContextWindow = TypeAliasType(
    "ContextWindow", Annotated[int, Field(gt=0, le=10000000, title="Context Window")]
)


Model = TypeAliasType(
    "Model",
    Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Model")],
)


class DelegateRequest(BaseModel):
    """
    A delegate starts from a brief, not its parent's history: a goal, and the items given.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    inherit: Annotated[
        dict[Annotated[str, StringConstraints(max_length=64)], bool] | None, Field(title="Inherit")
    ] = None
    unit: Annotated[Unit | None, Field(title="Unit")] = None
    goal: Annotated[str, Field(max_length=100000, min_length=1, title="Goal")]
    items: Annotated[list[dict[str, Any]] | None, Field(title="Items")] = None
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )


class DroppedFieldBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    index: Annotated[int, Field(title="Index")]
    field: Annotated[str, Field(title="Field")]
    """
    Path of the provider field, e.g. `is_error`.
    """


class ElidedEntry(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    first_seq: Annotated[int, Field(title="First Seq")]
    last_seq: Annotated[int, Field(title="Last Seq")]
    form: Annotated[
        Literal["cleared", "truncated", "summarized", "externalized", "dropped", "excluded"],
        Field(title="Form"),
    ]
    """
    cleared (a placeholder), truncated (head and tail), summarized or externalized (a compaction record stands for it), dropped (not shown: a compaction or the window left it out), excluded (normalization left it out).
    """
    tokens_full: Annotated[int, Field(title="Tokens Full")]
    """
    Stored tokens of the facts in the range.
    """
    tokens_shown: Annotated[int, Field(title="Tokens Shown")]
    """
    Tokens the context spends on them: their reduced items, or the record that stands for them (a record standing for several ranges counts in each).
    """
    reason: Annotated[str, Field(title="Reason")]
    """
    `compaction <id>`, a plan drop reason (`max_tokens`, `history_cut`), `truncation policy`, or `normalization: <reason>`.
    """


class EndSessionRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    conclusion: Annotated[dict[str, Any] | None, Field(title="Conclusion")] = None
    """
    For a child session: the one item appended to its parent.
    """
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )


class EndSessionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    compaction_id: Annotated[str | None, Field(title="Compaction Id")]
    hooks: Annotated[list[dict[str, Any]], Field(title="Hooks")]
    """
    Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
    """
    conclusion_seq: Annotated[int | None, Field(title="Conclusion Seq")] = None


class ErrorBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    code: Annotated[str, Field(title="Code")]
    message: Annotated[str, Field(title="Message")]
    details: Annotated[Any | None, Field(title="Details")] = None


class ErrorResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    error: ErrorBody


KeepRecent = TypeAliasType("KeepRecent", Annotated[int, Field(ge=0, le=1000, title="Keep Recent")])
"""
Each compaction's `keep_recent`.
"""


High = TypeAliasType("High", Annotated[float, Field(gt=0.0, le=1.0, title="High")])


Low = TypeAliasType("Low", Annotated[float, Field(gt=0.0, lt=1.0, title="Low")])


class EvaluateWatermarks(BaseModel):
    """
    Compaction watermarks, as shares of the usable window; one left out is the session's.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    high: Annotated[High | None, Field(title="High")] = None
    low: Annotated[Low | None, Field(title="Low")] = None


class EvaluationProgress(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    calls_done: Annotated[int, Field(title="Calls Done")]
    calls_total: Annotated[int, Field(title="Calls Total")]
    """
    The calls the replay makes over all its variants.
    """


class ExcludedItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    type: Annotated[str, Field(title="Type")]
    reason: Annotated[str, Field(title="Reason")]
    detail: Annotated[str | None, Field(title="Detail")] = None
    """
    For a `malformed` item, what is wrong with it, in words (`message without role`, `function_call arguments is an object, not text`); null for the other reasons.
    """


class ForkRequest(BaseModel):
    """
    A fork sees its parent's active history as of now: it is given no brief.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    inherit: Annotated[
        dict[Annotated[str, StringConstraints(max_length=64)], bool] | None, Field(title="Inherit")
    ] = None
    unit: Annotated[Unit | None, Field(title="Unit")] = None


class GoalRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    text: Annotated[str, Field(max_length=100000, min_length=1, title="Text")]


class GoalResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    version: Annotated[int, Field(title="Version")]
    seq: Annotated[int, Field(title="Seq")]


class GradedGrounding(BaseModel):
    """
    The same measure as the service took it itself, grading each call when its output was
    appended (an assembly's `grounding`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    calls_needing: Annotated[int, Field(title="Calls Needing")]
    needed: Annotated[int, Field(title="Needed")]
    visible: Annotated[int, Field(title="Visible")]
    calls_seeing_all: Annotated[int, Field(title="Calls Seeing All")]


class HealthResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    status: Annotated[str, Field(title="Status")]


class LoggedItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    item: Annotated[dict[str, Any], Field(title="Item")]
    type: Annotated[str, Field(title="Type")]
    recorded_at: Annotated[AwareDatetime, Field(title="Recorded At")]
    unit: Annotated[str | None, Field(title="Unit")]
    phase: Annotated[str | None, Field(title="Phase")]
    tokens: Annotated[int, Field(title="Tokens")]
    metadata: Annotated[dict[str, Any], Field(title="Metadata")]
    original: Annotated[dict[str, Any] | None, Field(title="Original")]
    """
    For an item appended as `chat` or `anthropic`: on the first item a message became, `{format, message, parts}` with the message exactly as sent; on the others, `{format, part, message_seq}`. Null for items appended as `responses` (`item` is exactly as sent).
    """
    timeline: Annotated[int | None, Field(title="Timeline")]
    """
    The PostgreSQL timeline that wrote the item (see the append's `timeline`). Null on SQLite and for items written before timelines were recorded.
    """


class LossCheck(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    missing: Annotated[list[str], Field(title="Missing")]
    fell_back: Annotated[bool, Field(title="Fell Back")]


class LostIdentifier(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    kind: Annotated[Literal["path", "command", "error"], Field(title="Kind")]
    text: Annotated[str, Field(title="Text")]
    seqs: Annotated[list[int], Field(title="Seqs")]
    """
    The covered facts that show it, where recall finds it.
    """


Index = TypeAliasType("Index", Annotated[str, Field(max_length=10000, title="Index")])


Locator1 = TypeAliasType("Locator1", Annotated[str, Field(max_length=2000, title="Locator")])


Link = TypeAliasType("Link", Annotated[str, Field(max_length=200)])


Environment1 = TypeAliasType(
    "Environment1", Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$")]
)


class ManifestEntrySpec(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(max_length=200, min_length=1, title="Id")]
    kind: Annotated[Literal["rule", "source"], Field(title="Kind")] = "rule"
    content: Annotated[str, Field(max_length=1000000, title="Content")]
    index: Annotated[Index | None, Field(title="Index")] = None
    locator: Annotated[Locator1 | None, Field(title="Locator")] = None
    links: Annotated[list[Link] | None, Field(title="Links")] = None
    environments: Annotated[list[Environment1] | None, Field(title="Environments")] = None


Priority = TypeAliasType("Priority", Annotated[str, Field(max_length=200)])


class ManifestVersionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(title="Name")]
    version: Annotated[int, Field(title="Version")]


class MovedItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    from_: Annotated[int, Field(alias="from", title="From")]
    to: Annotated[int, Field(title="To")]


class NextActionGrounding(BaseModel):
    """
    How the assembly served the next action its model took: the identifiers (paths, names,
    ids, codes) of the model output appended after it that the history before the call held.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    needed: Annotated[int, Field(title="Needed")]
    """
    Identifiers of the output that the history held.
    """
    visible: Annotated[int, Field(title="Visible")]
    """
    Of those, the ones in what the assembly sent.
    """
    recallable: Annotated[int, Field(title="Recallable")]
    """
    Not visible, but in a fact the assembly listed as elided: one recall away.
    """
    neither: Annotated[int, Field(title="Neither")]
    """
    Neither visible nor in an elided fact.
    """
    all_visible: Annotated[bool, Field(title="All Visible")]
    misses_by_form: Annotated[dict[str, int], Field(title="Misses By Form")]
    """
    Identifiers not visible, by the form of the elided facts that held them (`cleared`, `truncated`, `summarized`, `externalized`, `dropped`, `excluded`; `absent` when no elided fact did).
    """
    missed: Annotated[list[str], Field(title="Missed")]
    """
    The first 20 identifiers not visible, sorted.
    """
    ungraded: Annotated[int, Field(title="Ungraded")] = 0
    """
    Identifiers of the output left ungraded: an output naming more than 5,000 is graded on the first 5,000, sorted.
    """


class PlaceholderBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    index: Annotated[int, Field(title="Index")]
    kind: Annotated[
        Literal["empty_output", "tool_output_image", "unsupported_part", "leading_user_turn"],
        Field(title="Kind"),
    ]


class PlanEntryBody(BaseModel):
    """
    What became of one candidate or history entry. The history entries an assembly leaves
    out are planned as runs, one per reason: `history:<first>-<last>` (a run of one is named as
    its entry, `history:<n>`), with their tokens summed; `elided` names their facts by seq.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    source: Annotated[str, Field(title="Source")]
    layer: Annotated[str, Field(title="Layer")]
    source_class: Annotated[str, Field(title="Source Class")]
    decision: Annotated[Literal["selected", "dropped"], Field(title="Decision")]
    reason: Annotated[str | None, Field(title="Reason")]
    form: Annotated[str, Field(title="Form")]
    tokens: Annotated[int, Field(title="Tokens")]
    score: Annotated[float | None, Field(title="Score")]
    position: Annotated[int | None, Field(title="Position")]


class PrefixBreakBody(BaseModel):
    """
    Where a reused prefix broke, and the one cause (`docs/prompt-cache.md`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    position: Annotated[int, Field(title="Position")]
    """
    The first position not reused.
    """
    item_id: Annotated[str | None, Field(title="Item Id")]
    """
    The item now at that position (null: none).
    """
    seq: Annotated[int | None, Field(title="Seq")]
    """
    The fact seq that item stands for (null: none).
    """
    cause: Annotated[
        Literal[
            "compaction",
            "world_state",
            "goal",
            "excluded",
            "retracted",
            "window_cut",
            "tools",
            "output_format",
            "notice",
            "override",
        ],
        Field(title="Cause"),
    ]
    detail: Annotated[str, Field(title="Detail")]
    """
    What changed, in words, with the seqs or versions.
    """


class PrefixFigures(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    left_history_calls: Annotated[int, Field(title="Left History Calls")]
    """
    Calls whose messages left the previous call's before the end of its history: a prefix the provider's cache could not serve whole.
    """
    named_breaks: Annotated[dict[str, int], Field(title="Named Breaks")]
    """
    The prefix breaks the service named (`cache.break`), by cause.
    """


class ProviderCacheFigures(BaseModel):
    """
    The simulated provider against the service's own prediction of each call.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    expired_calls: Annotated[int, Field(title="Expired Calls")]
    """
    Calls an expired entry would have served more, had it not expired.
    """
    predicted_unexpired_tokens: Annotated[int, Field(title="Predicted Unexpired Tokens")]
    """
    The service's predicted reused prefix over the calls without expiry, under the provider's minimum prefix and blocks.
    """
    cached_unexpired_tokens: Annotated[int, Field(title="Cached Unexpired Tokens")]
    """
    What the provider served of those calls.
    """
    misses: Annotated[int, Field(title="Misses")]
    """
    Calls the provider served less than the service predicted.
    """
    misses_by_class: Annotated[dict[str, int], Field(title="Misses By Class")]
    """
    The class the service gave each miss when its usage was reported (`cache_outcome`).
    """
    unclassified_misses: Annotated[int, Field(title="Unclassified Misses")]


class RecallMatchBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    line: Annotated[int, Field(title="Line")]
    """
    Line number in the fact's text, counted from 1.
    """
    text: Annotated[str, Field(title="Text")]
    """
    The matching line, or an excerpt around the match.
    """


Seq = TypeAliasType("Seq", Annotated[int, Field(ge=1, le=9007199254740991, title="Seq")])
"""
The fact to read (or to search).
"""


Pattern = TypeAliasType(
    "Pattern", Annotated[str, Field(max_length=1000, min_length=1, title="Pattern")]
)
"""
An RE2 regular expression (no backreferences or lookaround); `^` and `$` match at line ends. With it, the answer lists matching lines instead of a window.
"""


FromSeq = TypeAliasType(
    "FromSeq", Annotated[int, Field(ge=1, le=9007199254740991, title="From Seq")]
)
"""
First fact a search covers.
"""


ToSeq = TypeAliasType("ToSeq", Annotated[int, Field(ge=1, le=9007199254740991, title="To Seq")])
"""
Last fact a search covers.
"""


class RecallRequest(BaseModel):
    """
    One fact in a window (`seq`), or a search (`pattern`) of one fact or a seq range. The
    schema states which fields go together; `from_seq` after `to_seq` it cannot.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[Seq | None, Field(title="Seq")] = None
    """
    The fact to read (or to search).
    """
    from_line: Annotated[int, Field(ge=1, le=9007199254740991, title="From Line")] = 1
    """
    First line of the window, counted from 1; for a search, the line of its first fact it starts at (a stopped search's `next_from_line`).
    """
    from_char: Annotated[int, Field(ge=0, le=9007199254740991, title="From Char")] = 0
    """
    Where in `from_line` the window starts: 0 unless paging through a line longer than `max_tokens` (the previous answer's `next_from_char`).
    """
    max_lines: Annotated[int, Field(ge=1, le=1000000000, title="Max Lines")] = 200
    """
    Lines in the window, capped by the service.
    """
    max_tokens: Annotated[int, Field(ge=16, le=1000000000, title="Max Tokens")] = 2000
    """
    Tokens in the window (exact, session encoding), capped by the service.
    """
    pattern: Annotated[Pattern | None, Field(title="Pattern")] = None
    """
    An RE2 regular expression (no backreferences or lookaround); `^` and `$` match at line ends. With it, the answer lists matching lines instead of a window.
    """
    from_seq: Annotated[FromSeq | None, Field(title="From Seq")] = None
    """
    First fact a search covers.
    """
    to_seq: Annotated[ToSeq | None, Field(title="To Seq")] = None
    """
    Last fact a search covers.
    """
    max_matches: Annotated[int, Field(ge=1, le=1000000000, title="Max Matches")] = 50
    """
    Matching lines listed, capped by the service.
    """


class RecallResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int | None, Field(title="Seq")]
    """
    The fact read or searched; null for a range search.
    """
    type: Annotated[str | None, Field(title="Type")]
    """
    That fact's type.
    """
    text: Annotated[str | None, Field(title="Text")]
    """
    The window: the fact's text exactly as logged, whole lines; null for a search.
    """
    from_line: Annotated[int | None, Field(title="From Line")]
    from_char: Annotated[int | None, Field(title="From Char")]
    to_line: Annotated[int | None, Field(title="To Line")]
    total_lines: Annotated[int | None, Field(title="Total Lines")]
    tokens: Annotated[int | None, Field(title="Tokens")]
    """
    Exact tokens of `text` in the session's encoding.
    """
    next_from_line: Annotated[int | None, Field(title="Next From Line")]
    """
    Where the next window starts, or the line of `next_from_seq` a stopped search goes on from; null at the end.
    """
    next_from_char: Annotated[int | None, Field(title="Next From Char")]
    matches: Annotated[list[RecallMatchBody], Field(title="Matches")]
    from_seq: Annotated[int | None, Field(title="From Seq")]
    """
    First fact the search covered.
    """
    to_seq: Annotated[int | None, Field(title="To Seq")]
    """
    Last fact the search covered.
    """
    next_from_seq: Annotated[int | None, Field(title="Next From Seq")]
    """
    Where a search stopped by a bound goes on (null: it covered the range).
    """
    stopped_by: Annotated[
        Literal["max_matches", "max_scan_bytes", "max_scan_seconds"] | None,
        Field(title="Stopped By"),
    ] = None
    """
    The bound that stopped a search early: `max_matches`, `max_scan_bytes` (the bytes given to the pattern, a byte searched twice counting twice) or `max_scan_seconds` (the CPU time it may take; a pattern RE2 can only run on its slower engine meets it first); null when it covered the range, and for a window.
    """
    scanned_bytes: Annotated[int | None, Field(title="Scanned Bytes")] = None
    """
    The bytes a search gave its pattern; null for a window.
    """
    max_scan_bytes: Annotated[int | None, Field(title="Max Scan Bytes")] = None
    """
    The byte bound a search ran under; null for a window.
    """
    max_scan_seconds: Annotated[float | None, Field(title="Max Scan Seconds")] = None
    """
    The CPU bound a search ran under; null for a window.
    """
    max_lines: Annotated[int, Field(title="Max Lines")]
    """
    The line bound applied (the request's, capped).
    """
    max_tokens: Annotated[int, Field(title="Max Tokens")]
    """
    The token bound applied (the request's, capped).
    """
    max_matches: Annotated[int, Field(title="Max Matches")]
    """
    The match bound applied (the request's, capped).
    """
    tool_output: Annotated[str, Field(title="Tool Output")]
    """
    The answer as the recall tool's output for the model: a header line naming the fact(s) and where to go on, then the window or the matching lines.
    """


MinRelevance = TypeAliasType(
    "MinRelevance", Annotated[float, Field(ge=0.0, le=1.0, title="Min Relevance")]
)


DropSource = TypeAliasType(
    "DropSource", Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$")]
)


class ResetResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    """
    The reset fact's seq; the active history starts after it.
    """


class RetractedItem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    item: Annotated[dict[str, Any], Field(title="Item")]
    """
    The hidden item as the log holds it.
    """


Seq1 = TypeAliasType("Seq1", Annotated[int, Field(ge=1, le=9007199254740991, title="Seq")])
"""
The item to hide; left out (or null), the newest item the active history shows.
"""


class RetractionRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[Seq1 | None, Field(title="Seq")] = None
    """
    The item to hide; left out (or null), the newest item the active history shows.
    """


class RetractionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    """
    The retraction fact's own seq.
    """
    retracted: Annotated[list[int], Field(title="Retracted")]
    """
    Every seq hidden: the one asked for, and the call or outputs paired with it.
    """
    items: Annotated[list[RetractedItem], Field(title="Items")]
    """
    The hidden items, in seq order, as the log holds them (Responses form).
    """


IncludeItem = TypeAliasType("IncludeItem", Annotated[str, Field(max_length=200)])


ExcludeItem = TypeAliasType("ExcludeItem", Annotated[str, Field(max_length=200)])


class RoleViewSpec(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    include: Annotated[list[IncludeItem] | None, Field(title="Include")] = None
    exclude: Annotated[list[ExcludeItem] | None, Field(title="Exclude")] = None


PreCompact = TypeAliasType("PreCompact", Annotated[AnyUrl, Field(title="Pre Compact")])


SessionEnd = TypeAliasType("SessionEnd", Annotated[AnyUrl, Field(title="Session End")])


class SessionHooks(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    pre_compact: Annotated[PreCompact | None, Field(title="Pre Compact")] = None
    session_end: Annotated[SessionEnd | None, Field(title="Session End")] = None
    failure_policy: Annotated[
        Literal["fail_open", "fail_closed"], Field(title="Failure Policy")
    ] = "fail_open"
    """
    What a hook timeout or error means for the compaction.
    """


class SourceSpec(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    source: Annotated[
        str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Source")
    ]
    items: Annotated[list[CandidateSpec], Field(title="Items")]


class TokenizerBody(BaseModel):
    """
    How the session's provider counts against the session's encoding: every window is in
    provider tokens, every exact count in the encoding, and a whole request is estimated as
    `overhead_tokens` + `ratio` × its exact tokens.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    family: Annotated[Literal["openai", "anthropic", "google", "other"], Field(title="Family")]
    """
    Tokenizer family, from the session's `model`.
    """
    ratio: Annotated[float, Field(title="Ratio")]
    """
    Provider tokens per encoding token: the family's default until usage reports naming their assembly, spread over enough sizes, identify it.
    """
    overhead_tokens: Annotated[int, Field(title="Overhead Tokens")]
    """
    Provider tokens every request has beyond what contextd assembled (tool definitions, system prompt framing, per-message formatting), fitted from usage reports; 0 until they show one. At most half of `usable_window`.
    """
    calibrated: Annotated[bool, Field(title="Calibrated")]
    """
    Whether any usage report has calibrated the session.
    """
    samples: Annotated[int, Field(title="Samples")]
    """
    Usage reports that calibrated the session.
    """
    exact: Annotated[bool, Field(title="Exact")]
    """
    An OpenAI model counted in its own encoding: `ratio` is 1, always (`overhead_tokens` is still fitted).
    """


class TruncationSpec(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    mode: Annotated[Literal["tokens", "bytes"], Field(title="Mode")] = "tokens"
    limit: Annotated[int, Field(ge=0, le=10000000, title="Limit")] = 10000
    serialization_margin: Annotated[float, Field(ge=1.0, le=10.0, title="Serialization Margin")] = (
        1.2
    )


AssemblyId = TypeAliasType("AssemblyId", Annotated[str, Field(max_length=64, title="Assembly Id")])


class UsageRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    input_tokens: Annotated[int, Field(ge=0, le=1000000000000, title="Input Tokens")] = 0
    cached_tokens: Annotated[int, Field(ge=0, le=1000000000000, title="Cached Tokens")] = 0
    output_tokens: Annotated[int, Field(ge=0, le=1000000000000, title="Output Tokens")] = 0
    unit: Annotated[Unit | None, Field(title="Unit")] = None
    phase: Annotated[Phase | None, Field(title="Phase")] = None
    assembly_id: Annotated[AssemblyId | None, Field(title="Assembly Id")] = None


class VariantSettings(BaseModel):
    """
    What a variant ran with, every setting resolved.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    context_window: Annotated[int, Field(title="Context Window")]
    strategy: Annotated[
        Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"] | None,
        Field(title="Strategy"),
    ]
    """
    null: the advice's recommendation.
    """
    high_watermark: Annotated[float, Field(title="High Watermark")]
    low_watermark: Annotated[float, Field(title="Low Watermark")]
    keep_recent: Annotated[int, Field(title="Keep Recent")]
    follow_advice: Annotated[bool, Field(title="Follow Advice")]
    recall_tool: Annotated[bool, Field(title="Recall Tool")]
    cache: Annotated[dict[str, int | float], Field(title="Cache")]
    """
    The session's `cache` terms the service was told.
    """
    summarizer: Annotated[Literal["builtin", "client"], Field(title="Summarizer")]


class WorkingSetEntry(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    seq: Annotated[int, Field(title="Seq")]
    reason: Annotated[str, Field(title="Reason")]


class WorldStateRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    sections: Annotated[
        dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")], Any],
        Field(title="Sections"),
    ]
    """
    The whole current world state, by section id; a section left out is removed. A null member of an object means absent (as in a merge patch), except inside an array, which is kept whole.
    """


class WorldStateResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    version: Annotated[int, Field(title="Version")]
    updates: Annotated[list[dict[str, Any]], Field(title="Updates")]
    changes: Annotated[list[dict[str, str]], Field(title="Changes")]
    patch: Annotated[dict[str, Any] | None, Field(title="Patch")]


class AdviceBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    should_compact: Annotated[bool, Field(title="Should Compact")]
    pressure: Annotated[float, Field(title="Pressure")]
    reasons: Annotated[list[dict[str, Any]], Field(title="Reasons")]
    turns_until_full: Annotated[int | None, Field(title="Turns Until Full")] = None
    recommended_strategy: Annotated[str | None, Field(title="Recommended Strategy")] = None
    cache: AdviceCacheBody | None = None
    """
    The compaction priced by the lineage's prompt cache (null: not priced, as for a stateless call).
    """


class AdviceResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    should_compact: Annotated[bool, Field(title="Should Compact")]
    pressure: Annotated[float, Field(title="Pressure")]
    reasons: Annotated[list[dict[str, Any]], Field(title="Reasons")]
    turns_until_full: Annotated[int | None, Field(title="Turns Until Full")]
    recommended_strategy: Annotated[str | None, Field(title="Recommended Strategy")]
    cache: AdviceCacheBody | None
    """
    The compaction priced by the lineage's prompt cache.
    """
    active_tokens: Annotated[int, Field(title="Active Tokens")]
    """
    Exact tokens the pressure weighs: the history without state fragments and the pinned state (goal, its restatement, world state).
    """
    provider_tokens_estimate: Annotated[int, Field(title="Provider Tokens Estimate")]
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    tokenizer: TokenizerBody


class AppendResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    first_seq: Annotated[int, Field(title="First Seq")]
    last_seq: Annotated[int, Field(title="Last Seq")]
    items: Annotated[list[AppendedItem], Field(title="Items")]
    excluded: Annotated[list[ExcludedItem], Field(title="Excluded")]
    """
    Appended items kept in the log but excluded from model-visible history.
    """
    timeline: Annotated[int | None, Field(title="Timeline")] = None
    """
    The PostgreSQL timeline that wrote these items (a promoted standby writes on a higher one). Keep it with the seqs: an item that later reads back at one of them with another timeline is not this one (the append was lost in an asynchronous failover and its seq given again). Null on SQLite.
    """


class AssembleRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    sources: Annotated[list[SourceSpec] | None, Field(title="Sources")] = None
    budget: BudgetSpec | None = None
    policy: Annotated[Literal["balanced", "compact", "expansive"], Field(title="Policy")] = (
        "balanced"
    )
    placement: Annotated[Literal["edges", "input_order"], Field(title="Placement")] = "edges"
    min_relevance: Annotated[float, Field(ge=0.0, le=1.0, title="Min Relevance")] = 0.0
    encoding: Annotated[Literal["o200k_base", "cl100k_base"] | None, Field(title="Encoding")] = None
    unit: Annotated[Unit | None, Field(title="Unit")] = None
    phase: Annotated[Phase | None, Field(title="Phase")] = None
    output_format: Annotated[
        Literal["responses", "chat", "anthropic"], Field(title="Output Format")
    ] = "responses"
    input_modalities: Annotated[
        list[Literal["text", "image", "audio"]], Field(title="Input Modalities")
    ] = ["text", "image"]
    manifest: Annotated[Manifest | None, Field(title="Manifest")] = None
    role: Annotated[Role | None, Field(title="Role")] = None
    environment: Annotated[Environment | None, Field(title="Environment")] = None
    recall_tool: Annotated[bool | None, Field(title="Recall Tool")] = None
    """
    Offer the recall tool in `tools` (session mode); null: the session's setting, on unless the session was created with `recall_tool: false`.
    """


class AssemblyDiffBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    added: Annotated[list[str], Field(title="Added")]
    removed: Annotated[list[str], Field(title="Removed")]
    moved: Annotated[list[MovedItem], Field(title="Moved")]
    tokens_delta: Annotated[int, Field(title="Tokens Delta")]
    prefix_break: PrefixBreakBody | None = None
    """
    Where and why the replayed context's prompt prefix would break against the original assembly's (as `cache.break` names it between calls); null when the replay reuses the original's whole history.
    """


class CacheBody(BaseModel):
    """
    The predicted prompt-cache reuse against the previous assembly of the same session and
    unit: its leading items, while each is byte-identical to the one at the same position.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    reused_prefix_tokens: Annotated[int, Field(title="Reused Prefix Tokens")]
    new_tokens: Annotated[int, Field(title="New Tokens")]
    reused_prefix_items: Annotated[int, Field(title="Reused Prefix Items")]
    """
    Leading items reused; also the `position` of the first item not reused.
    """
    last_reused_item_id: Annotated[str | None, Field(title="Last Reused Item Id")]
    """
    `id` of the last reused item (at position `reused_prefix_items` - 1); null when nothing is reused.
    """
    break_: Annotated[PrefixBreakBody | None, Field(alias="break")] = None
    """
    Where and why the reused prefix ended before the previous assembly's history did; null when it did not (or the lineage has no earlier assembly to compare).
    """


class CompactedIdentifiers(BaseModel):
    """
    The file paths, shell commands and error signatures of the range a compaction covered,
    and those the new history no longer lets the agent find: not visible, no item showing them
    kept verbatim, none replaced by a placeholder naming its fact (recall still reads them).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    found: Annotated[int, Field(title="Found")]
    kept: Annotated[int, Field(title="Kept")]
    lost: Annotated[list[LostIdentifier], Field(title="Lost")]
    """
    The first 50 lost, in the order found.
    """
    lost_total: Annotated[int, Field(title="Lost Total")]


class ContextWindowResponse(BaseModel):
    """
    The current active context against the session's window.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[str, Field(title="Session Id")]
    context_window: Annotated[int, Field(title="Context Window")]
    usable_window: Annotated[int, Field(title="Usable Window")]
    """
    Provider tokens a session-mode call may fill.
    """
    window_tokens: Annotated[int, Field(title="Window Tokens")]
    """
    The usable window in the session's encoding, beside the overhead: floor((usable_window - overhead_tokens) / ratio), what assembly fits.
    """
    active_tokens: Annotated[int, Field(title="Active Tokens")]
    """
    Exact tokens of the active context.
    """
    provider_tokens_estimate: Annotated[int, Field(title="Provider Tokens Estimate")]
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    by_source_class: Annotated[dict[str, int], Field(title="By Source Class")]
    """
    `active_tokens` by source class: `history` (without state fragments), `goal` (with its restatement), `world_state`.
    """
    pressure: Annotated[float, Field(title="Pressure")]
    """
    active_tokens / window_tokens, as advice weighs it.
    """
    tokenizer: TokenizerBody


class ConversionReportBody(BaseModel):
    """
    What the output format could not carry. `index` is the item's position in the
    Responses-form list converted (for `/assemble`, its `position`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    excluded: Annotated[list[dict[str, Any]], Field(title="Excluded")]
    """
    Items left out: `{index, type, reason}`, reason `foreign_reasoning` (opaque reasoning of another provider) or `not_expressible`.
    """
    dropped_fields: Annotated[list[DroppedFieldBody], Field(title="Dropped Fields")]
    """
    Provider fields of items read in another format that this format has no place for (e.g. Anthropic `is_error` written as Chat).
    """
    placeholders: Annotated[list[PlaceholderBody], Field(title="Placeholders")]
    """
    Content replaced by a short text the provider accepts: an empty tool output, an image in a Chat tool output (the image follows in a user message), a part the format cannot carry, or the user turn opening an Anthropic history.
    """


class CreateSessionRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    encoding: Annotated[Literal["o200k_base", "cl100k_base"] | None, Field(title="Encoding")] = None
    context_window: Annotated[ContextWindow | None, Field(title="Context Window")] = None
    model: Annotated[Model | None, Field(title="Model")] = None
    metadata: Annotated[dict[str, Any] | None, Field(title="Metadata")] = None
    hooks: SessionHooks | None = None
    compaction: CompactionOptions | None = None
    cache: CacheOptions | None = None
    recall_tool: Annotated[bool, Field(title="Recall Tool")] = True
    """
    Whether session-mode `/assemble` offers the recall tool in `tools` (a request's own `recall_tool` overrides it).
    """


class EvaluateVariant(BaseModel):
    """
    One way to run the session. Every field but `name` left out is the session's own.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(max_length=200, min_length=1, pattern="^[^\\x00]*$", title="Name")]
    context_window: Annotated[ContextWindow | None, Field(title="Context Window")] = None
    strategy: Annotated[
        Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"] | None,
        Field(title="Strategy"),
    ] = None
    """
    The strategy every advised compaction uses; left out, the one the advice recommends.
    """
    watermarks: EvaluateWatermarks | None = None
    keep_recent: Annotated[KeepRecent | None, Field(title="Keep Recent")] = None
    """
    Each compaction's `keep_recent`.
    """
    follow_advice: Annotated[bool, Field(title="Follow Advice")] = True
    """
    false: the runtime never compacts (the window's fitting does all the work).
    """
    recall_tool: Annotated[bool | None, Field(title="Recall Tool")] = None
    summarizer: Annotated[Literal["builtin", "client"], Field(title="Summarizer")] = "builtin"
    """
    `client`: each product record's summary is the narrative the log recorded where the session compacted with a summarizer of its own (the newest before the replayed compaction, each used once), else the built-in one. The replay calls no summarizer.
    """
    cache: CacheOptions | None = None
    """
    Prompt-cache terms to tell the service, over the session's own: its advice prices the cache by them. The simulated provider keeps the session's terms, so a variant that tells the service no cache discount (`read_price` 1) shows what advice blind to the cache would cost.
    """


class EvaluationGrounding(BaseModel):
    """
    Of the identifiers each call's own output went on to use that the history before it
    held (the goal's left out): how many the context showed, how many only an elided fact
    held (one recall away), and how many it held nowhere.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    calls_needing: Annotated[int, Field(title="Calls Needing")]
    """
    Calls whose output used any such identifier.
    """
    needed: Annotated[int, Field(title="Needed")]
    visible: Annotated[int, Field(title="Visible")]
    recallable: Annotated[int, Field(title="Recallable")]
    missed: Annotated[int, Field(title="Missed")]
    visible_share: Annotated[float, Field(title="Visible Share")]
    all_visible_calls: Annotated[float, Field(title="All Visible Calls")]
    """
    Share of `calls_needing` that saw them all.
    """
    calls_seeing_all: Annotated[int, Field(title="Calls Seeing All")]
    """
    Of `calls_needing`, those that saw them all.
    """
    misses_by_form: Annotated[dict[str, int], Field(title="Misses By Form")]
    """
    The recallable ones, by the form of the `elided` entry holding them (`summarized`, `cleared`, `dropped`, `truncated`, ...).
    """
    calls_hiding: Annotated[int, Field(title="Calls Hiding")]
    """
    Calls whose context elided anything.
    """
    calls_naming_every_seq: Annotated[int, Field(title="Calls Naming Every Seq")]
    """
    Of `calls_hiding`, those whose visible text names every elided entry's first seq (what a recall starts from).
    """
    recall_checked: Annotated[int, Field(title="Recall Checked")]
    """
    Recallable identifiers searched for with `/recall` over their entry's range.
    """
    recall_confirmed: Annotated[int, Field(title="Recall Confirmed")]
    """
    Of those, the ones the search handed back.
    """
    graded: GradedGrounding


class ItemsPageResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[LoggedItem], Field(title="Items")]
    next_after_seq: Annotated[int | None, Field(title="Next After Seq")]


class ManifestRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    entries: Annotated[list[ManifestEntrySpec], Field(max_length=10000, title="Entries")]
    roles: Annotated[
        dict[
            Annotated[str, StringConstraints(pattern=r"^[^\x00]*$", min_length=1, max_length=200)],
            RoleViewSpec,
        ]
        | None,
        Field(title="Roles"),
    ] = None
    priorities: Annotated[list[Priority] | None, Field(title="Priorities")] = None


class ManifestResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    entries: Annotated[list[ManifestEntrySpec], Field(max_length=10000, title="Entries")]
    roles: Annotated[
        dict[
            Annotated[str, StringConstraints(pattern=r"^[^\x00]*$", min_length=1, max_length=200)],
            RoleViewSpec,
        ]
        | None,
        Field(title="Roles"),
    ] = None
    priorities: Annotated[list[Priority] | None, Field(title="Priorities")] = None
    name: Annotated[str, Field(title="Name")]
    version: Annotated[int, Field(title="Version")]


class NormalizeReportBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    synthesized_outputs: Annotated[list[dict[str, Any]], Field(title="Synthesized Outputs")]
    removed_orphans: Annotated[list[dict[str, Any]], Field(title="Removed Orphans")]
    reordered_outputs: Annotated[list[dict[str, Any]], Field(title="Reordered Outputs")]
    deduplicated_outputs: Annotated[list[dict[str, Any]], Field(title="Deduplicated Outputs")]
    stripped_media: Annotated[list[dict[str, Any]], Field(title="Stripped Media")]
    truncated_outputs: Annotated[list[dict[str, Any]], Field(title="Truncated Outputs")]
    excluded: Annotated[list[dict[str, Any]], Field(title="Excluded")]
    """
    Items kept out: by admission (`index` in the input) and by the output format (`foreign_reasoning`, `not_expressible`: `index` in the normalized list).
    """
    dropped_fields: Annotated[list[DroppedFieldBody], Field(title="Dropped Fields")]
    placeholders: Annotated[list[PlaceholderBody], Field(title="Placeholders")]


class NormalizeRequest(BaseModel):
    """
    Either `items` (stateless) or `session_id` (that session's active history).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[dict[str, Any]] | None, Field(title="Items")] = None
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    format: Annotated[Literal["responses", "chat", "anthropic"], Field(title="Format")] = (
        "responses"
    )
    output_format: Annotated[
        Literal["responses", "chat", "anthropic"] | None, Field(title="Output Format")
    ] = None
    input_modalities: Annotated[
        list[Literal["text", "image", "audio"]], Field(title="Input Modalities")
    ] = ["text", "image"]
    truncation: TruncationSpec | None = None
    encoding: Annotated[Literal["o200k_base", "cl100k_base"] | None, Field(title="Encoding")] = None


class NormalizeResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[dict[str, Any]], Field(title="Items")]
    system: Annotated[list[dict[str, Any]] | None, Field(title="System")]
    """
    Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
    """
    tokens: Annotated[int, Field(title="Tokens")]
    """
    Exact tokens of the returned items' model-visible text.
    """
    report: NormalizeReportBody
    untranslated: Annotated[list[int], Field(title="Untranslated")]
    """
    Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
    """


class ReplayOverrides(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    budget: BudgetSpec | None = None
    policy: Annotated[Literal["balanced", "compact", "expansive"] | None, Field(title="Policy")] = (
        None
    )
    placement: Annotated[Literal["edges", "input_order"] | None, Field(title="Placement")] = None
    min_relevance: Annotated[MinRelevance | None, Field(title="Min Relevance")] = None
    drop_sources: Annotated[list[DropSource] | None, Field(title="Drop Sources")] = None
    replace_sources: Annotated[list[SourceSpec] | None, Field(title="Replace Sources")] = None


class ReplayRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    overrides: ReplayOverrides | None = None


class SessionDetailResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[str, Field(title="Session Id")]
    encoding: Annotated[str, Field(title="Encoding")]
    context_window: Annotated[int, Field(title="Context Window")]
    usable_window: Annotated[int, Field(title="Usable Window")]
    """
    Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
    """
    model: Annotated[str | None, Field(title="Model")]
    metadata: Annotated[dict[str, Any], Field(title="Metadata")]
    hooks: SessionHooks
    compaction: CompactionOptions
    cache: CacheTermsBody
    recall_tool: Annotated[bool, Field(title="Recall Tool")]
    """
    Whether assemblies offer the recall tool.
    """
    tokenizer: TokenizerBody
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    last_seq: Annotated[int, Field(title="Last Seq")]
    item_count: Annotated[int, Field(title="Item Count")]
    active_tokens: Annotated[int, Field(title="Active Tokens")]
    provider_tokens_estimate: Annotated[int, Field(title="Provider Tokens Estimate")]
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    goal: Annotated[dict[str, Any] | None, Field(title="Goal")]
    world_state_version: Annotated[int, Field(title="World State Version")]
    compactions: Annotated[int, Field(title="Compactions")]


class SessionResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[str, Field(title="Session Id")]
    encoding: Annotated[str, Field(title="Encoding")]
    context_window: Annotated[int, Field(title="Context Window")]
    usable_window: Annotated[int, Field(title="Usable Window")]
    """
    Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
    """
    model: Annotated[str | None, Field(title="Model")]
    metadata: Annotated[dict[str, Any], Field(title="Metadata")]
    hooks: SessionHooks
    compaction: CompactionOptions
    cache: CacheTermsBody
    recall_tool: Annotated[bool, Field(title="Recall Tool")]
    """
    Whether assemblies offer the recall tool.
    """
    tokenizer: TokenizerBody
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    last_seq: Annotated[int, Field(title="Last Seq")]


class VariantResult(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(title="Name")]
    settings: VariantSettings
    calls: Annotated[int, Field(title="Calls")]
    input_tokens: Annotated[int, Field(title="Input Tokens")]
    reused_tokens: Annotated[int, Field(title="Reused Tokens")]
    """
    Tokens of the leading messages identical to the previous call's.
    """
    reuse: Annotated[float, Field(title="Reuse")]
    fresh_tokens: Annotated[int, Field(title="Fresh Tokens")]
    cached_tokens: Annotated[int, Field(title="Cached Tokens")]
    """
    What a simulated provider cache served.
    """
    written_tokens: Annotated[int, Field(title="Written Tokens")]
    """
    What it wrote into its cache.
    """
    cost: Annotated[float, Field(title="Cost")]
    """
    In fresh input tokens, in the session's cache terms: uncached input at 1, cached at the read price, the write premium on what is written.
    """
    compactions: Annotated[int, Field(title="Compactions")]
    compactions_per_100: Annotated[float, Field(title="Compactions Per 100")]
    recorded_summaries: Annotated[int, Field(title="Recorded Summaries")]
    """
    Compactions whose record used the summary the log recorded (`client`).
    """
    peak_tokens: Annotated[int, Field(title="Peak Tokens")]
    goal_calls: Annotated[int, Field(title="Goal Calls")]
    """
    Calls with a goal to keep.
    """
    goal_kept: Annotated[float | None, Field(title="Goal Kept")]
    """
    Share of `goal_calls` showing the goal (null: none).
    """
    goal_kept_calls: Annotated[int, Field(title="Goal Kept Calls")]
    pairing_kept: Annotated[float, Field(title="Pairing Kept")]
    """
    Share of calls whose tool calls and outputs pair.
    """
    pairing_kept_calls: Annotated[int, Field(title="Pairing Kept Calls")]
    over_budget_calls: Annotated[int, Field(title="Over Budget Calls")]
    grounding: EvaluationGrounding
    predicted_reused_tokens: Annotated[int, Field(title="Predicted Reused Tokens")]
    """
    The reused prefix the service predicted (`cache.reused_prefix_tokens`), summed.
    """
    restated_tokens: Annotated[int, Field(title="Restated Tokens")]
    """
    Tokens of the goal's restatement at the end, summed.
    """
    history_cut_calls: Annotated[int, Field(title="History Cut Calls")]
    """
    Calls whose assembly had to cut the history: its oldest items left the context without a compaction's record of them.
    """
    prefix: PrefixFigures
    provider_cache: ProviderCacheFigures


class AssembleResponse(BaseModel):
    """
    `items` carry each selected candidate (history items in Responses form); `messages` is
    the whole selected context converted to the requested `output_format`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    assembly_id: Annotated[str, Field(title="Assembly Id")]
    plan_hash: Annotated[str, Field(title="Plan Hash")]
    total_tokens: Annotated[int, Field(title="Total Tokens")]
    provider_tokens_estimate: Annotated[int | None, Field(title="Provider Tokens Estimate")] = None
    """
    Session mode: estimate (not exact) of the provider's count of the whole request `total_tokens` are sent in, ceil(`tokenizer.overhead_tokens` + total_tokens × `tokenizer.ratio`), the overhead included.
    """
    encoding: Annotated[str | None, Field(title="Encoding")] = None
    """
    The encoding `total_tokens` and every count here are in.
    """
    tokenizer: TokenizerBody | None = None
    """
    Session mode: the session's tokenizer as of this call.
    """
    truncated: Annotated[bool, Field(title="Truncated")]
    """
    Whether the budget left something out: a candidate dropped for `max_items`, `max_tokens` (of the whole or of its source) or `recall_cap`, or history not shown. Drops for relevance, duplicates, superseded contributions or a missing attribution do not count.
    """
    over_budget: Annotated[bool, Field(title="Over Budget")]
    items: Annotated[list[AssembledItem], Field(title="Items")]
    plan: Annotated[list[PlanEntryBody], Field(title="Plan")]
    by_source_class: Annotated[dict[str, int], Field(title="By Source Class")]
    cache: CacheBody
    advice: AdviceBody
    budget: BudgetSpec
    """
    The effective budget after policy and overrides.
    """
    startup_tokens: Annotated[int, Field(title="Startup Tokens")]
    """
    Tokens of the required stable prefix.
    """
    unit: Annotated[str | None, Field(title="Unit")]
    """
    Execution unit the tokens are accounted to.
    """
    messages: Annotated[list[dict[str, Any]], Field(title="Messages")]
    """
    Every selected item in position order, in `output_format`, ready to send: text candidates as developer messages, history items as they are. Anthropic: the leading ones are in `system`, later ones are user-turn text blocks.
    """
    system: Annotated[list[dict[str, Any]] | None, Field(title="System")]
    """
    Anthropic output: the top-level `system` text blocks (instructions, rules, the pinned goal, world state). Null for `chat` and `responses`.
    """
    cache_breakpoints: Annotated[list[CacheBreakpointBody], Field(title="Cache Breakpoints")]
    """
    Anthropic output: the blocks given `cache_control` (at most four with any the client sent), and why.
    """
    prompt_cache_key: Annotated[str | None, Field(title="Prompt Cache Key")]
    """
    `chat`/`responses` output of a session: a stable key per session and unit to pass as the request's `prompt_cache_key`, so calls of one lineage share a cache.
    """
    conversion: ConversionReportBody
    tools: Annotated[list[dict[str, Any]] | None, Field(title="Tools")] = None
    """
    Session mode: the tools contextd defines, in `output_format` (the recall tool, unless `recall_tool` is off), to send beside the runtime's own. Byte-identical on every call of a session.
    """
    elided: Annotated[list[ElidedEntry] | None, Field(title="Elided")] = None
    """
    Session mode: every fact of the session's history the context shows reduced or not at all, as seq ranges of one form and reason, in seq order. The visible text names each range's first seq; `POST /sessions/{id}/recall` reads any of them back.
    """
    tools_tokens: Annotated[int, Field(title="Tools Tokens")] = 0
    """
    Tokens of `tools` as JSON. They are kept out of the window the context may fill, and counted as pinned by the advice, as far as the session's fitted overhead (`tokenizer.overhead_tokens`, learnt from usage reports that count them) does not hold them already.
    """


class CompactResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    compaction_id: Annotated[str | None, Field(title="Compaction Id")]
    strategy: Annotated[str, Field(title="Strategy")]
    requested_strategy: Annotated[str, Field(title="Requested Strategy")]
    declares: Annotated[dict[str, list[str]], Field(title="Declares")]
    tokens_before: Annotated[int, Field(title="Tokens Before")]
    tokens_after: Annotated[int, Field(title="Tokens After")]
    summary: Annotated[dict[str, Any] | None, Field(title="Summary")]
    notes: Annotated[dict[str, Any] | None, Field(title="Notes")]
    working_set: Annotated[list[WorkingSetEntry], Field(title="Working Set")]
    history: Annotated[list[dict[str, Any]], Field(title="History")]
    system: Annotated[list[dict[str, Any]] | None, Field(title="System")]
    """
    Anthropic output: the history's leading system and developer messages (the re-anchored invariants) as top-level `system` text blocks.
    """
    conversion: ConversionReportBody
    loss_check: LossCheck
    target_tokens: Annotated[int | None, Field(title="Target Tokens")] = None
    """
    The target the strategy compacted toward (null: none).
    """
    over_target_because: Annotated[str | None, Field(title="Over Target Because")] = None
    """
    Why `tokens_after` is over `target_tokens`, what each kept part takes; null when it is within.
    """
    identifiers: CompactedIdentifiers | None = None
    """
    Null when nothing was compacted.
    """
    hooks: Annotated[list[dict[str, Any]], Field(title="Hooks")]
    """
    Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
    """
    summarization_prompt: Annotated[str | None, Field(title="Summarization Prompt")] = None
    summarizer: Annotated[dict[str, Any], Field(title="Summarizer")]
    noop: Annotated[bool, Field(title="Noop")]
    dry_run: Annotated[bool, Field(title="Dry Run")]
    applied: Annotated[bool, Field(title="Applied")]
    """
    Whether a compaction fact was written.
    """
    not_applied_because: Annotated[
        Literal["dry_run", "stateless", "noop", "too_little_gain"] | None,
        Field(title="Not Applied Because"),
    ]
    """
    Why nothing was written: `dry_run`, `stateless` (items given), `noop` (nothing to compact) or `too_little_gain` (the plan frees less than `CTX_COMPACTION_MIN_GAIN` of the active history).
    """
    recommended_strategy: Annotated[str | None, Field(title="Recommended Strategy")] = None
    """
    When the requested strategy found nothing to do or freed too little: the strategy the session's advice recommends now, which would (null when it is the one requested or none is advised). With `fallback`, it is the one planned.
    """


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    variants: Annotated[list[EvaluateVariant] | None, Field(max_length=8, title="Variants")] = None


class EvaluateResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    session_id: Annotated[str, Field(title="Session Id")]
    last_seq: Annotated[int, Field(title="Last Seq")]
    """
    The log was replayed up to this seq.
    """
    calls: Annotated[int, Field(title="Calls")]
    """
    Model calls in the log: where a run of model output starts.
    """
    variants: Annotated[list[VariantResult], Field(title="Variants")]
    """
    `current` first, then the request's.
    """


class EvaluationJobResponse(BaseModel):
    """
    An evaluation run as a job: `GET /evaluations/{id}` while it runs, and after.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    evaluation_id: Annotated[str, Field(title="Evaluation Id")]
    session_id: Annotated[str, Field(title="Session Id")]
    status: Annotated[Literal["running", "done", "failed", "cancelled"], Field(title="Status")]
    progress: EvaluationProgress
    result: EvaluateResponse | None
    """
    The evaluation, once `done`.
    """
    error: Annotated[str | None, Field(title="Error")]
    """
    Why it `failed`: the replay's error, the service stopping, or the job lost with its process (a restart).
    """
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    """
    When its runner last wrote its progress.
    """


class HistoryResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[dict[str, Any]], Field(title="Items")]
    system: Annotated[list[dict[str, Any]] | None, Field(title="System")]
    """
    Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
    """
    tokens: Annotated[int, Field(title="Tokens")]
    """
    Exact tokens of the returned items' model-visible text.
    """
    report: NormalizeReportBody
    untranslated: Annotated[list[int], Field(title="Untranslated")]
    """
    Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
    """
    compaction_id: Annotated[str | None, Field(title="Compaction Id")]


class ReplayResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    assembly: AssembleResponse
    diff: AssemblyDiffBody


class StoredAssemblyResponse(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    assembly_id: Annotated[str, Field(title="Assembly Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    session_id: Annotated[str | None, Field(title="Session Id")]
    request: Annotated[dict[str, Any], Field(title="Request")]
    response: AssembleResponse
    grounding: NextActionGrounding | None = None
    """
    Session mode: how the assembly served its model's next action, graded when that output was appended (the first model output after it, in the same unit); null until then.
    """
    cache_outcome: Annotated[
        Literal["as_predicted", "below_minimum", "expired", "evicted", "more_than_predicted"]
        | None,
        Field(title="Cache Outcome"),
    ] = None
    """
    The provider's prompt-cache outcome against `cache.reused_prefix_tokens`, classified when a usage report named this assembly (the latest report's): `as_predicted`, `below_minimum`, `expired` (idle past the TTL), `evicted` (within it), `more_than_predicted`; null until then.
    """
