"""The assembly router's models: an assembly (the candidates, the budget, the plan and the
rendered context), a stored assembly with its next-action grounding, and a replay with its diff.
Field names are the contract."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, model_validator, with_config
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from app.contract.common import (
    WHOLE_NUMBER,
    ConversionReportBody,
    Count,
    Label,
    ManifestName,
    RequestModel,
    SessionIdText,
    StrictModel,
    TokenizerBody,
    given,
)
from app.domain.assemble import (
    CANDIDATE_DEFAULTS,
    BreakCause,
    Decision,
    FallbackForm,
    Layer,
    Placement,
    RawForm,
)
from app.domain.budget import Policy
from app.domain.elision import ElisionForm
from app.domain.grounding import MAX_GRADED_IDENTIFIERS
from app.domain.items import Format
from app.domain.normalize import Modality
from app.domain.prompt_cache import CacheOutcome
from app.tokens import Encoding

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
    """What became of one candidate or history entry. The history entries an assembly leaves
    out are planned as runs, one per reason: `history:<first>-<last>` (a run of one is named as
    its entry, `history:<n>`), with their tokens summed; `elided` names their facts by seq."""

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
    break_: PrefixBreakBody | None = Field(
        default=None,
        alias="break",
        description="Where and why the reused prefix ended before the previous assembly's "
        "history did; null when it did not (or the lineage has no earlier assembly to compare).",
    )


class PrefixBreakBody(BaseModel):
    """Where a reused prefix broke, and the one cause (`docs/prompt-cache.md`)."""

    position: int = Field(description="The first position not reused.")
    item_id: str | None = Field(description="The item now at that position (null: none).")
    seq: int | None = Field(description="The fact seq that item stands for (null: none).")
    cause: BreakCause
    detail: str = Field(description="What changed, in words, with the seqs or versions.")


class AdviceCacheBody(BaseModel):
    """What compacting now (to the recommended strategy's product) would save and cost, given
    the lineage's prompt cache, in fresh input tokens (a fresh input token costs 1)."""

    state: Literal["warm", "cold", "empty"] = Field(
        description="`warm`: the provider still holds the lineage's prefix; `cold`: the "
        "lineage's last call came longer ago than the TTL; `empty`: no call yet, or the context "
        "is below the provider's minimum cacheable prefix."
    )
    idle_seconds: float | None = Field(
        description="Seconds since the lineage's last call (null: it had none)."
    )
    ttl_seconds: int = Field(description="The session's cache TTL (its `cache` terms).")
    horizon_calls: int = Field(
        description="The calls the compaction is priced over: until the compacted context "
        "grows back to the high watermark at the recent rate per call."
    )
    reduction_tokens: int = Field(description="Tokens the compaction would take off the context.")
    saving: float = Field(
        description="The reduction not sent on those calls: at the read price, or at the write "
        "price on the first call when the cache holds nothing."
    )
    cost: float = Field(
        description="The cached prefix thrown away: the compacted context written at the write "
        "price where it would have been read at the read price (0 when the cache is not warm)."
    )
    at_least_tokens: int | None = Field(
        description="The least reduction whose saving meets the cost: a compaction that a "
        "signal alone advises is not advised below it (null: no reduction does, as when "
        "cached tokens cost nothing)."
    )


class AdviceBody(BaseModel):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: int | None = None
    recommended_strategy: str | None = None
    cache: AdviceCacheBody | None = Field(
        default=None,
        description="The compaction priced by the lineage's prompt cache (null: not priced, as "
        "for a stateless call).",
    )


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
    truncated: bool = Field(
        description="Whether the budget left something out: a candidate dropped for `max_items`, "
        "`max_tokens` (of the whole or of its source) or `recall_cap`, or history not shown. "
        "Drops for relevance, duplicates, superseded contributions or a missing attribution do "
        "not count."
    )
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


class AssembleAnswer(TypedDict):
    """`AssembleResponse` without its `assembly_id`, as the JSON-ready data the assembly use
    case builds, stores and sends without validating it again (a test holds the two to the same
    fields). Nested bodies are plain JSON objects of the shapes the response model declares."""

    plan_hash: str
    total_tokens: int
    provider_tokens_estimate: int | None
    encoding: str | None
    tokenizer: dict[str, Any] | None
    truncated: bool
    over_budget: bool
    items: list[dict[str, Any]]
    plan: Sequence[Mapping[str, Any]]
    by_source_class: dict[str, int]
    cache: dict[str, Any]
    advice: dict[str, Any]
    budget: dict[str, Any]
    startup_tokens: int
    unit: str | None
    messages: list[dict[str, Any]]
    system: list[dict[str, Any]] | None
    cache_breakpoints: list[dict[str, Any]]
    prompt_cache_key: str | None
    conversion: dict[str, Any]
    tools: list[dict[str, Any]]
    tools_tokens: int
    elided: list[dict[str, Any]]


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
    ungraded: int = Field(
        default=0,
        description="Identifiers of the output left ungraded: an output naming more than "
        f"{MAX_GRADED_IDENTIFIERS:,} is graded on the first {MAX_GRADED_IDENTIFIERS:,}, sorted.",
    )


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
    cache_outcome: CacheOutcome | None = Field(
        default=None,
        description="The provider's prompt-cache outcome against `cache.reused_prefix_tokens`, "
        "classified when a usage report named this assembly (the latest report's): "
        "`as_predicted`, `below_minimum`, `expired` (idle past the TTL), `evicted` (within it), "
        "`more_than_predicted`; null until then.",
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
    prefix_break: PrefixBreakBody | None = Field(
        default=None,
        description="Where and why the replayed context's prompt prefix would break against the "
        "original assembly's (as `cache.break` names it between calls); null when the replay "
        "reuses the original's whole history.",
    )


class ReplayResponse(BaseModel):
    assembly: AssembleResponse
    diff: AssemblyDiffBody
