"""Wire models: requests end in `Request`, responses in `Response`. Field names are the contract."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    HttpUrl,
    model_validator,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from app.domain import names
from app.domain.assemble import (
    CANDIDATE_DEFAULTS,
    Decision,
    FallbackForm,
    Layer,
    Placement,
    RawForm,
)
from app.domain.budget import Policy
from app.domain.calibration import Family
from app.domain.compaction import NotAppliedReason, Strategy, Summarizer
from app.domain.elision import ElisionForm
from app.domain.facts import ChildKind
from app.domain.formats import PlaceholderKind
from app.domain.items import Format
from app.domain.manifest import EntryKind
from app.domain.normalize import Modality
from app.domain.recall import MAX_PATTERN_LENGTH
from app.domain.truncation import TruncationMode
from app.domain.world_state import SECTION_ID_PATTERN
from app.hooks import FailurePolicy, FailureReason, HookOutcome
from app.tokens import Encoding

SessionIdText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=names.MAX_LENGTH,
        pattern=names.SESSION_ID_PATTERN,
        description="Letters, digits and `._:-`; not `.` or `..`, which URL clients drop.",
    ),
]
Label = Annotated[
    str, Field(min_length=1, max_length=names.MAX_LENGTH, pattern=names.LABEL_PATTERN)
]
"""A caller-chosen name (see `app.domain.names`)."""
ManifestName = Annotated[
    str, Field(min_length=1, max_length=names.MAX_LENGTH, pattern=names.MANIFEST_NAME_PATTERN)
]


def _whole_number(value: object) -> object:
    """`2.0` is an integer to JSON Schema (a number with a zero fraction), so a request may
    spell one so; a strict model would refuse it. Nothing else is converted: not `true`, not
    `"2"`, not `2.5`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WHOLE_NUMBER = BeforeValidator(_whole_number)
"""Placed after an integer's `Field`, where pydantic still writes its bounds into the schema."""
MAX_SEQ = 2**53 - 1
"""The largest sequence number a request may name: the largest integer every JSON reader holds
exactly (a double, a JavaScript number). The database's 64-bit bound, written as a maximum, is
read by such readers as 2**63, one past it, so the contract would promise what is refused."""
Count = Annotated[int, Field(ge=0, le=10**12), WHOLE_NUMBER]


class StrictModel(BaseModel):
    """Refuses fields it does not name, and converts no scalar into another: `true` is not a
    number, `1` is not a string, `"1"` is not an integer. A request the contract refuses is
    refused here, so what the service accepts is exactly what `openapi.yaml` states."""

    model_config = ConfigDict(extra="forbid", strict=True)


class RequestModel(StrictModel):
    """A whole request body. Its text is valid Unicode: `app.api.json_body` refuses a lone
    UTF-16 surrogate escape before any model sees it."""


def given(name: str) -> dict[str, Any]:
    """JSON Schema for "field `name` is given": present and not null, as handlers read it."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def exactly_one_of(first: str, second: str) -> dict[str, Any]:
    """JSON Schema for "exactly one of two optional fields is given" (see `given`)."""
    return {"if": given(first), "then": {"not": given(second)}, "else": given(second)}


HOOK_OUTCOMES = (
    f"Each hook's outcome: `event`; `outcome` ({', '.join(get_args(HookOutcome))}); `reason`, "
    f"why a call failed or was not made ({', '.join(get_args(FailureReason))}; null otherwise); "
    "`detail`, the same in words (the kind of refused address and the setting that allows it, "
    "the deadline in seconds, the error class of a failed connection, the HTTP status, the "
    "answer limit in bytes) or a veto's reason."
)
"""The description of a response's `hooks`, `HookResult.as_dict` each."""


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


class CreateSessionRequest(RequestModel):
    session_id: SessionIdText | None = None
    encoding: Encoding | None = None
    context_window: Annotated[int, Field(gt=0, le=10_000_000), WHOLE_NUMBER] | None = None
    model: Label | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    hooks: SessionHooks = Field(default_factory=SessionHooks)
    compaction: CompactionOptions = Field(default_factory=CompactionOptions)
    recall_tool: bool = Field(
        default=True,
        description="Whether session-mode `/assemble` offers the recall tool in `tools` (a "
        "request's own `recall_tool` overrides it).",
    )


class TokenizerBody(BaseModel):
    """How the session's provider counts against the session's encoding: every window is in
    provider tokens, every exact count in the encoding, and a whole request is estimated as
    `overhead_tokens` + `ratio` × its exact tokens."""

    family: Family = Field(description="Tokenizer family, from the session's `model`.")
    ratio: float = Field(
        description="Provider tokens per encoding token: the family's default until usage "
        "reports naming their assembly, spread over enough sizes, identify it."
    )
    overhead_tokens: int = Field(
        description="Provider tokens every request has beyond what contextd assembled (tool "
        "definitions, system prompt framing, per-message formatting), fitted from usage "
        "reports; 0 until they show one. At most half of `usable_window`."
    )
    calibrated: bool = Field(description="Whether any usage report has calibrated the session.")
    samples: int = Field(description="Usage reports that calibrated the session.")
    exact: bool = Field(
        description="An OpenAI model counted in its own encoding: `ratio` is 1, always "
        "(`overhead_tokens` is still fitted)."
    )


ProviderEstimate = Annotated[
    int,
    Field(
        description="Estimate (not exact) of the provider's count of a whole request made of "
        "the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × "
        "`tokenizer.ratio`), the overhead included."
    ),
]


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
    original: dict[str, Any] | None = Field(
        description="For an item appended as `chat` or `anthropic`: on the first item a message "
        "became, `{format, message, parts}` with the message exactly as sent; on the others, "
        "`{format, part, message_seq}`. Null for items appended as `responses` (`item` is "
        "exactly as sent)."
    )


class ItemsPageResponse(BaseModel):
    items: list[LoggedItem]
    next_after_seq: int | None


class HealthResponse(BaseModel):
    status: str


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


class DroppedFieldBody(BaseModel):
    index: int
    field: str = Field(description="Path of the provider field, e.g. `is_error`.")


class PlaceholderBody(BaseModel):
    index: int
    kind: PlaceholderKind


class ConversionReportBody(BaseModel):
    """What the output format could not carry. `index` is the item's position in the
    Responses-form list converted (for `/assemble`, its `position`)."""

    excluded: list[dict[str, Any]] = Field(
        description="Items left out: `{index, type, reason}`, reason `foreign_reasoning` "
        "(opaque reasoning of another provider) or `not_expressible`."
    )
    dropped_fields: list[DroppedFieldBody] = Field(
        description="Provider fields of items read in another format that this format has no "
        "place for (e.g. Anthropic `is_error` written as Chat)."
    )
    placeholders: list[PlaceholderBody] = Field(
        description="Content replaced by a short text the provider accepts: an empty tool "
        "output, an image in a Chat tool output (the image follows in a user message), a part "
        "the format cannot carry, or the user turn opening an Anthropic history."
    )


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


Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def _defaults_to(field: str) -> Any:
    """Documents the core's default for a candidate field the caller may leave out."""
    default = CANDIDATE_DEFAULTS[field]
    # A read-only mapping default is documented as the JSON object it stands for.
    return Field(
        json_schema_extra={"default": dict(default) if isinstance(default, Mapping) else default}
    )


# A typed dict, not a model: one request may carry thousands of candidates, and pydantic
# validates plain dicts about twice as fast as it builds model instances.
@with_config(
    ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "if": {"required": ["content"]},
            "then": {"not": {"required": ["item"]}},
            "else": {"required": ["item"]},
        },
    )
)
class CandidateSpec(TypedDict):
    """One candidate: `id` and exactly one of `content` and `item` (the schema's `if`);
    any other field may be left out. `source_class` defaults to the source's name."""

    id: Annotated[str, Field(min_length=1, max_length=500)]
    content: NotRequired[str]
    item: NotRequired[dict[str, Any]]
    layer: NotRequired[Annotated[Layer, _defaults_to("layer")]]
    source_class: NotRequired[Label | None]
    form: NotRequired[Annotated[RawForm, Field(json_schema_extra={"default": "raw"})]]
    forms: NotRequired[Annotated[dict[FallbackForm, str], _defaults_to("forms")]]
    locator: NotRequired[Annotated[str, Field(min_length=1, max_length=2000)] | None]
    required: NotRequired[Annotated[bool, _defaults_to("required")]]
    priority: NotRequired[Annotated[Score, _defaults_to("priority")]]
    relevance: NotRequired[Annotated[Score, _defaults_to("relevance")]]
    trust: NotRequired[Annotated[Score, _defaults_to("trust")]]
    freshness: NotRequired[Annotated[Score, _defaults_to("freshness")]]
    tokens: NotRequired[Count | None]


class SourceSpec(StrictModel):
    source: Label
    items: list[CandidateSpec]

    @model_validator(mode="after")
    def _candidates_are_well_formed(self) -> SourceSpec:
        for candidate in self.items:
            if (candidate.get("content") is None) == (candidate.get("item") is None):
                raise ValueError(
                    f"candidate {candidate['id']!r}: give exactly one of `content` and `item`"
                )
        if len({candidate["id"] for candidate in self.items}) < len(self.items):
            counts = Counter(candidate["id"] for candidate in self.items)
            repeated = sorted(i for i, n in counts.items() if n > 1)
            raise PydanticCustomError(
                "duplicate_candidate_ids",
                "duplicate candidate ids in one contribution: {ids}",
                {"ids": repeated[:5]},
            )
        return self


Limit = Annotated[int, Field(ge=0, le=100_000_000), WHOLE_NUMBER]


class BudgetSpec(StrictModel):
    max_items: Limit | None = None
    max_tokens: Limit | None = None
    max_items_per_source: Limit | None = None
    max_tokens_per_source: Limit | None = None


class AssembleRequest(RequestModel):
    # A manifest is read through one role's view, so naming one names the role too.
    model_config = ConfigDict(json_schema_extra={"if": given("manifest"), "then": given("role")})

    session_id: SessionIdText | None = None
    sources: list[SourceSpec] = Field(default_factory=list)
    budget: BudgetSpec | None = None
    policy: Policy = "balanced"
    placement: Placement = "edges"
    min_relevance: Score = 0.0
    encoding: Encoding | None = None
    unit: Label | None = None
    phase: Label | None = None
    output_format: Format = "responses"
    input_modalities: list[Modality] = Field(default=["text", "image"])
    manifest: ManifestName | None = None
    role: Label | None = None
    environment: Label | None = None
    recall_tool: bool | None = Field(
        default=None,
        description="Offer the recall tool in `tools` (session mode); null: the session's "
        "setting, on unless the session was created with `recall_tool: false`.",
    )


class AssembledItem(BaseModel):
    id: str
    source: str
    layer: str
    source_class: str
    form: str
    position: int
    tokens: int
    content: str | None = None
    item: dict[str, Any] | None = None


class PlanEntryBody(BaseModel):
    id: str
    source: str
    layer: str
    source_class: str
    decision: Decision
    reason: str | None
    form: str
    tokens: int
    score: float | None
    position: int | None


class CacheBody(BaseModel):
    """The predicted prompt-cache reuse against the previous assembly of the same session and
    unit: its leading items, while each is byte-identical to the one at the same position."""

    reused_prefix_tokens: int
    new_tokens: int
    reused_prefix_items: int = Field(
        description="Leading items reused; also the `position` of the first item not reused."
    )
    last_reused_item_id: str | None = Field(
        description="`id` of the last reused item (at position `reused_prefix_items` - 1); "
        "null when nothing is reused."
    )


class AdviceBody(BaseModel):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: int | None = None
    recommended_strategy: str | None = None


class CacheBreakpointBody(BaseModel):
    reason: Literal["stable_prefix", "previous_call", "history_end"] = Field(
        description="`stable_prefix`: the end of the system content; `previous_call`: the last "
        "block the previous call of this session and unit shares; `history_end`: the end of "
        "the history, which the next call is expected to share."
    )
    position: int = Field(description="Position of the selected item the breakpoint closes.")
    item_id: str
    message: int | None = Field(description="Index in `messages`; null: in `system`.")
    block: int = Field(description="Index of the marked block in that content list.")


class ElidedEntry(BaseModel):
    first_seq: int
    last_seq: int
    form: ElisionForm = Field(
        description="cleared (a placeholder), truncated (head and tail), summarized or "
        "externalized (a compaction record stands for it), dropped (not shown: a compaction "
        "or the window left it out), excluded (normalization left it out)."
    )
    tokens_full: int = Field(description="Stored tokens of the facts in the range.")
    tokens_shown: int = Field(
        description="Tokens the context spends on them: their reduced items, or the record "
        "that stands for them (a record standing for several ranges counts in each)."
    )
    reason: str = Field(
        description="`compaction <id>`, a plan drop reason (`max_tokens`, `history_cut`), "
        "`truncation policy`, or `normalization: <reason>`."
    )


class AssembleResponse(BaseModel):
    """`items` carry each selected candidate (history items in Responses form); `messages` is
    the whole selected context converted to the requested `output_format`."""

    assembly_id: str
    plan_hash: str
    total_tokens: int
    provider_tokens_estimate: int | None = Field(
        default=None,
        description="Session mode: estimate (not exact) of the provider's count of the whole "
        "request `total_tokens` are sent in, ceil(`tokenizer.overhead_tokens` + total_tokens "
        "× `tokenizer.ratio`), the overhead included.",
    )
    encoding: str | None = Field(
        default=None, description="The encoding `total_tokens` and every count here are in."
    )
    tokenizer: TokenizerBody | None = Field(
        default=None, description="Session mode: the session's tokenizer as of this call."
    )
    truncated: bool
    over_budget: bool
    items: list[AssembledItem]
    plan: list[PlanEntryBody]
    by_source_class: dict[str, int]
    cache: CacheBody
    advice: AdviceBody
    budget: BudgetSpec = Field(description="The effective budget after policy and overrides.")
    startup_tokens: int = Field(description="Tokens of the required stable prefix.")
    unit: str | None = Field(description="Execution unit the tokens are accounted to.")
    messages: list[dict[str, Any]] = Field(
        description="Every selected item in position order, in `output_format`, ready to send: "
        "text candidates as developer messages, history items as they are. Anthropic: the "
        "leading ones are in `system`, later ones are user-turn text blocks."
    )
    system: list[dict[str, Any]] | None = Field(
        description="Anthropic output: the top-level `system` text blocks (instructions, rules, "
        "the pinned goal, world state). Null for `chat` and `responses`."
    )
    cache_breakpoints: list[CacheBreakpointBody] = Field(
        description="Anthropic output: the blocks given `cache_control` (at most four with any "
        "the client sent), and why."
    )
    prompt_cache_key: str | None = Field(
        description="`chat`/`responses` output of a session: a stable key per session and unit "
        "to pass as the request's `prompt_cache_key`, so calls of one lineage share a cache."
    )
    conversion: ConversionReportBody
    tools: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Session mode: the tools contextd defines, in `output_format` (the recall "
        "tool, unless `recall_tool` is off), to send beside the runtime's own. Byte-identical "
        "on every call of a session.",
    )
    elided: list[ElidedEntry] = Field(
        default_factory=list,
        description="Session mode: every fact of the session's history the context shows "
        "reduced or not at all, as seq ranges of one form and reason, in seq order. The "
        "visible text names each range's first seq; `POST /sessions/{id}/recall` reads any of "
        "them back.",
    )
    tools_tokens: int = Field(
        default=0,
        description="Tokens of `tools` as JSON. They are kept out of the window the context may "
        "fill, and counted as pinned by the advice, as far as the session's fitted overhead "
        "(`tokenizer.overhead_tokens`, learnt from usage reports that count them) does not "
        "hold them already.",
    )


class NextActionGrounding(BaseModel):
    """How the assembly served the next action its model took: the identifiers (paths, names,
    ids, codes) of the model output appended after it that the history before the call held."""

    needed: int = Field(description="Identifiers of the output that the history held.")
    visible: int = Field(description="Of those, the ones in what the assembly sent.")
    recallable: int = Field(
        description="Not visible, but in a fact the assembly listed as elided: one recall away."
    )
    neither: int = Field(description="Neither visible nor in an elided fact.")
    all_visible: bool
    misses_by_form: dict[str, int] = Field(
        description="Identifiers not visible, by the form of the elided facts that held them "
        "(`cleared`, `truncated`, `summarized`, `externalized`, `dropped`, `excluded`; "
        "`absent` when no elided fact did)."
    )
    missed: list[str] = Field(description="The first 20 identifiers not visible, sorted.")


class StoredAssemblyResponse(BaseModel):
    assembly_id: str
    created_at: datetime
    session_id: str | None
    request: dict[str, Any]
    response: AssembleResponse
    grounding: NextActionGrounding | None = Field(
        default=None,
        description="Session mode: how the assembly served its model's next action, graded "
        "when that output was appended (the first model output after it, in the same unit); "
        "null until then.",
    )


class ReplayOverrides(StrictModel):
    budget: BudgetSpec | None = None
    policy: Policy | None = None
    placement: Placement | None = None
    min_relevance: Score | None = None
    drop_sources: list[Label] = Field(default_factory=list)
    replace_sources: list[SourceSpec] = Field(default_factory=list)


class ReplayRequest(RequestModel):
    overrides: ReplayOverrides = Field(default_factory=ReplayOverrides)


class MovedItem(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    from_: int = Field(alias="from", serialization_alias="from")
    to: int


class AssemblyDiffBody(BaseModel):
    added: list[str]
    removed: list[str]
    moved: list[MovedItem]
    tokens_delta: int


class ReplayResponse(BaseModel):
    assembly: AssembleResponse
    diff: AssemblyDiffBody


class UsageRequest(RequestModel):
    input_tokens: Count = 0
    cached_tokens: Count = 0
    output_tokens: Count = 0
    unit: Label | None = None
    phase: Label | None = None
    assembly_id: Annotated[str, Field(max_length=64)] | None = None


class GoalRequest(RequestModel):
    text: Annotated[str, Field(min_length=1, max_length=100_000)]


class GoalResponse(BaseModel):
    version: int
    seq: int


class WorldStateRequest(RequestModel):
    sections: dict[str, Any] = Field(
        description="The whole current world state, by section id; a section left out is "
        "removed. A null member of an object means absent (as in a merge patch), except "
        "inside an array, which is kept whole.",
        json_schema_extra={
            "propertyNames": {"pattern": f"^{SECTION_ID_PATTERN}$"},
            # A section is removed by leaving it out; a null one would say it twice.
            "additionalProperties": {"not": {"type": "null"}},
        },
    )


class WorldStateResponse(BaseModel):
    version: int
    updates: list[dict[str, Any]]
    changes: list[dict[str, str]]
    patch: dict[str, Any] | None


class CompactParams(StrictModel):
    keep_recent: Annotated[int, Field(ge=0, le=10_000), WHOLE_NUMBER] = 3
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


class AdviceResponse(BaseModel):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: int | None
    recommended_strategy: str | None
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


class ManifestEntrySpec(StrictModel):
    id: Annotated[str, Field(min_length=1, max_length=200)]
    kind: EntryKind = "rule"
    content: Annotated[str, Field(max_length=1_000_000)]
    index: Annotated[str, Field(max_length=10_000)] | None = None
    locator: Annotated[str, Field(max_length=2000)] | None = None
    links: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)
    environments: list[Label] = Field(default_factory=list)


class RoleViewSpec(StrictModel):
    include: list[Annotated[str, Field(max_length=200)]] | None = None
    exclude: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)


class ManifestRequest(RequestModel):
    entries: Annotated[list[ManifestEntrySpec], Field(max_length=10_000)]
    roles: dict[Label, RoleViewSpec] = Field(default_factory=dict)
    priorities: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)


class ManifestResponse(ManifestRequest):
    name: str
    version: int


class ManifestVersionResponse(BaseModel):
    name: str
    version: int


class ForkRequest(RequestModel):
    """A fork sees its parent's active history as of now: it is given no brief."""

    session_id: SessionIdText | None = None
    inherit: dict[Annotated[str, Field(max_length=64)], bool] = Field(default_factory=dict)
    unit: Label | None = None


class DelegateRequest(ForkRequest):
    """A delegate starts from a brief, not its parent's history: a goal, and the items given."""

    goal: Annotated[str, Field(min_length=1, max_length=100_000)]
    items: list[dict[str, Any]] = Field(default_factory=list)
    format: Format = "responses"


class ChildSessionResponse(BaseModel):
    session_id: str
    parent_id: str
    kind: ChildKind
    inherit: dict[str, bool]
    unit: str | None
    fork_seq: int | None
    last_seq: int


class ConclusionRequest(RequestModel):
    conclusion: dict[str, Any]
    format: Format = "responses"


class ConclusionResponse(BaseModel):
    parent_id: str
    seq: int


class RetractionRequest(RequestModel):
    seq: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_SEQ,
            description="The item to hide; left out (or null), the newest item the active "
            "history shows.",
        ),
        WHOLE_NUMBER,
    ] = None


class RetractedItem(BaseModel):
    seq: int
    item: dict[str, Any] = Field(description="The hidden item as the log holds it.")


class RetractionResponse(BaseModel):
    seq: int = Field(description="The retraction fact's own seq.")
    retracted: list[int] = Field(
        description="Every seq hidden: the one asked for, and the call or outputs paired with it."
    )
    items: list[RetractedItem] = Field(
        description="The hidden items, in seq order, as the log holds them (Responses form)."
    )


class ResetResponse(BaseModel):
    seq: int = Field(description="The reset fact's seq; the active history starts after it.")


Seq = Annotated[int, Field(ge=1, le=MAX_SEQ), WHOLE_NUMBER]
Bound = Annotated[int, Field(ge=1, le=10**9), WHOLE_NUMBER]


class RecallRequest(RequestModel):
    """One fact in a window (`seq`), or a search (`pattern`) of one fact or a seq range. The
    schema states which fields go together; `from_seq` after `to_seq` it cannot."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": given("seq"),
            "then": {"not": {"anyOf": [given("from_seq"), given("to_seq")]}},
            "else": {"allOf": [given("pattern"), {"anyOf": [given("from_seq"), given("to_seq")]}]},
        }
    )

    seq: Seq | None = Field(default=None, description="The fact to read (or to search).")
    from_line: Annotated[int, Field(ge=1, le=MAX_SEQ), WHOLE_NUMBER] = Field(
        default=1, description="First line of the window, counted from 1."
    )
    from_char: Annotated[int, Field(ge=0, le=MAX_SEQ), WHOLE_NUMBER] = Field(
        default=0,
        description="Where in `from_line` the window starts: 0 unless paging through a line "
        "longer than `max_tokens` (the previous answer's `next_from_char`).",
    )
    max_lines: Bound = Field(default=200, description="Lines in the window, capped by the service.")
    max_tokens: Annotated[int, Field(ge=16, le=10**9), WHOLE_NUMBER] = Field(
        default=2000,
        description="Tokens in the window (exact, session encoding), capped by the service.",
    )
    pattern: Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_LENGTH)] | None = Field(
        default=None,
        description="An RE2 regular expression (no backreferences or lookaround); `^` and `$` "
        "match at line ends. With it, the answer lists matching lines instead of a window.",
    )
    from_seq: Seq | None = Field(default=None, description="First fact a search covers.")
    to_seq: Seq | None = Field(default=None, description="Last fact a search covers.")
    max_matches: Bound = Field(
        default=50, description="Matching lines listed, capped by the service."
    )

    @model_validator(mode="after")
    def _one_target(self) -> RecallRequest:
        ranged = self.from_seq is not None or self.to_seq is not None
        if self.seq is not None and ranged:
            raise ValueError("give `seq`, or `from_seq`/`to_seq` with a `pattern`, not both")
        if self.seq is None and not ranged:
            raise ValueError("give `seq` (one fact) or `from_seq`/`to_seq` (a search)")
        if ranged and self.pattern is None:
            raise ValueError("a seq range is searched: give a `pattern`")
        if self.from_seq is not None and self.to_seq is not None and self.from_seq > self.to_seq:
            raise PydanticCustomError(
                "seq_range_reversed",
                "from_seq ({from_seq}) is after to_seq ({to_seq})",
                {"from_seq": self.from_seq, "to_seq": self.to_seq},
            )
        return self


class RecallMatchBody(BaseModel):
    seq: int
    line: int = Field(description="Line number in the fact's text, counted from 1.")
    text: str = Field(description="The matching line, or an excerpt around the match.")


class RecallResponse(BaseModel):
    seq: int | None = Field(description="The fact read or searched; null for a range search.")
    type: str | None = Field(description="That fact's type.")
    text: str | None = Field(
        description="The window: the fact's text exactly as logged, whole lines; null for a search."
    )
    from_line: int | None
    from_char: int | None
    to_line: int | None
    total_lines: int | None
    tokens: int | None = Field(description="Exact tokens of `text` in the session's encoding.")
    next_from_line: int | None = Field(description="Where the next window starts; null at the end.")
    next_from_char: int | None
    matches: list[RecallMatchBody]
    from_seq: int | None = Field(description="First fact the search covered.")
    to_seq: int | None = Field(description="Last fact the search covered.")
    next_from_seq: int | None = Field(
        description="Where a search stopped by a bound goes on (null: it covered the range)."
    )
    max_lines: int = Field(description="The line bound applied (the request's, capped).")
    max_tokens: int = Field(description="The token bound applied (the request's, capped).")
    max_matches: int = Field(description="The match bound applied (the request's, capped).")
    tool_output: str = Field(
        description="The answer as the recall tool's output for the model: a header line "
        "naming the fact(s) and where to go on, then the window or the matching lines."
    )
