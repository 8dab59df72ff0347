# The same bodies as TypedDicts: the keyword arguments of the client's methods, generated from
# openapi.yaml by `make client-models`; do not edit.
# ruff: noqa: E501

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class AdviceCacheBody(TypedDict):
    """
    What compacting now (to the recommended strategy's product) would save and cost, given
    the lineage's prompt cache, in fresh input tokens (a fresh input token costs 1).
    """

    state: Literal["warm", "cold", "empty"]
    """
    `warm`: the provider still holds the lineage's prefix; `cold`: the lineage's last call came longer ago than the TTL; `empty`: no call yet, or the context is below the provider's minimum cacheable prefix.
    """
    idle_seconds: float | None
    """
    Seconds since the lineage's last call (null: it had none).
    """
    ttl_seconds: int
    """
    The session's cache TTL (its `cache` terms).
    """
    horizon_calls: int
    """
    The calls the compaction is priced over: until the compacted context grows back to the high watermark at the recent rate per call.
    """
    reduction_tokens: int
    """
    Tokens the compaction would take off the context.
    """
    saving: float
    """
    The reduction not sent on those calls: at the read price, or at the write price on the first call when the cache holds nothing.
    """
    cost: float
    """
    The cached prefix thrown away: the compacted context written at the write price where it would have been read at the read price (0 when the cache is not warm).
    """
    at_least_tokens: int | None
    """
    The least reduction whose saving meets the cost: a compaction that a signal alone advises is not advised below it (null: no reduction does, as when cached tokens cost nothing).
    """


class AppendMetadata(TypedDict):
    """
    Provenance of a batch; unknown keys are kept with the facts.
    """

    harness_authored: NotRequired[bool]
    truncation_token_limit: NotRequired[int | None]


class AppendRequest(TypedDict):
    items: list[dict[str, Any]]
    format: NotRequired[Literal["responses", "chat", "anthropic"]]
    expected_last_seq: NotRequired[int | None]
    idempotency_key: NotRequired[str | None]
    unit: NotRequired[str | None]
    phase: NotRequired[str | None]
    metadata: NotRequired[AppendMetadata]
    malformed: NotRequired[Literal["exclude", "refuse"]]
    """
    What becomes of an item of a known type whose fields no provider could take (a message without `role`, a call whose `arguments` are not text): `exclude` appends it, kept in the log and out of every context, and `excluded` says what is wrong; `refuse` answers 422 `malformed_item` naming it, and writes nothing.
    """


class AppendedItem(TypedDict):
    seq: int
    type: str
    tokens: int


class AssembledItem(TypedDict):
    id: str
    source: str
    layer: str
    source_class: str
    form: str
    position: int
    tokens: int
    content: NotRequired[str | None]
    item: NotRequired[dict[str, Any] | None]


class BudgetSpec(TypedDict):
    max_items: NotRequired[int | None]
    max_tokens: NotRequired[int | None]
    max_items_per_source: NotRequired[int | None]
    max_tokens_per_source: NotRequired[int | None]


class CacheBreakpointBody(TypedDict):
    reason: Literal["stable_prefix", "previous_call", "history_end"]
    """
    `stable_prefix`: the end of the system content; `previous_call`: the last block the previous call of this session and unit shares; `history_end`: the end of the history, which the next call is expected to share.
    """
    position: int
    """
    Position of the selected item the breakpoint closes.
    """
    item_id: str
    message: int | None
    """
    Index in `messages`; null: in `system`.
    """
    block: int
    """
    Index of the marked block in that content list.
    """


class CacheOptions(TypedDict):
    """
    A session's prompt-cache terms where they differ from its model family's
    (`docs/prompt-cache.md`): a longer TTL bought, a negotiated price, a model's own minimum.
    """

    read_price: NotRequired[float | None]
    """
    A cached input token's price, as a share of a fresh one's.
    """
    write_price: NotRequired[float | None]
    """
    Writing a token into the cache, as a share of fresh input.
    """
    ttl_seconds: NotRequired[int | None]
    """
    How long the provider keeps an entry unused.
    """
    minimum_prefix: NotRequired[int | None]
    """
    The shortest prefix the provider caches, in its tokens.
    """
    block: NotRequired[int | None]
    """
    The granularity of a cache hit, in the provider's tokens.
    """


class CacheTermsBody(TypedDict):
    """
    The prompt-cache terms the session is judged by: its model family's, with its own
    `cache` overrides.
    """

    read_price: float
    write_price: float
    ttl_seconds: int
    minimum_prefix: int
    block: int


class CandidateSpec(TypedDict):
    """
    One candidate: `id` and exactly one of `content` and `item` (the schema's `if`);
    any other field may be left out. `source_class` defaults to the source's name.
    """

    id: str
    content: NotRequired[str]
    item: NotRequired[dict[str, Any]]
    layer: NotRequired[Literal["prefix", "task", "recent", "memory", "retrieval"]]
    source_class: NotRequired[str | None]
    form: NotRequired[Literal["raw"]]
    forms: NotRequired[dict[Literal["skeleton", "reference"], str]]
    locator: NotRequired[str | None]
    required: NotRequired[bool]
    priority: NotRequired[float]
    relevance: NotRequired[float]
    trust: NotRequired[float]
    freshness: NotRequired[float]
    tokens: NotRequired[int | None]


class ChildSessionResponse(TypedDict):
    session_id: str
    parent_id: str
    kind: Literal["delegate", "fork"]
    inherit: dict[str, bool]
    unit: str | None
    fork_seq: int | None
    last_seq: int


class ClientSummary(TypedDict):
    text: str


class CompactParams(TypedDict):
    keep_recent: NotRequired[int]
    clear_at_least_tokens: NotRequired[int]
    exclude_tools: NotRequired[list[str]]
    clear_tool_inputs: NotRequired[bool]
    target_tokens: NotRequired[int | None]
    summarizer: NotRequired[Literal["builtin", "llm", "client"]]


class CompactRequest(TypedDict):
    """
    Either `session_id` (writes a compaction fact) or `items` (stateless, writes nothing).
    """

    session_id: NotRequired[str | None]
    items: NotRequired[list[dict[str, Any]] | None]
    format: NotRequired[Literal["responses", "chat", "anthropic"]]
    output_format: NotRequired[Literal["responses", "chat", "anthropic"] | None]
    strategy: Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"]
    params: NotRequired[CompactParams]
    summary: NotRequired[ClientSummary | None]
    goal: NotRequired[str | None]
    """
    Stateless mode only: the goal to pin (sessions use their own).
    """
    dry_run: NotRequired[bool]
    encoding: NotRequired[Literal["o200k_base", "cl100k_base"] | None]
    fallback: NotRequired[bool]
    """
    Session mode: when `strategy` finds nothing to do or frees less than `CTX_COMPACTION_MIN_GAIN`, use the strategy the session's advice recommends instead (`strategy` in the answer, `requested_strategy` the one asked for).
    """


class CompactionOptions(TypedDict):
    """
    A session's compaction watermarks, as shares of its usable window; a field left out takes
    the service's setting (`CTX_COMPACTION_HIGH_WATERMARK`, `CTX_COMPACTION_LOW_WATERMARK`).
    """

    high_watermark: NotRequired[float | None]
    """
    Pressure at which compaction is advised.
    """
    low_watermark: NotRequired[float | None]
    """
    Pressure a compaction brings the context down to.
    """


class ConclusionRequest(TypedDict):
    conclusion: dict[str, Any]
    format: NotRequired[Literal["responses", "chat", "anthropic"]]


class ConclusionResponse(TypedDict):
    parent_id: str
    seq: int


class DelegateRequest(TypedDict):
    """
    A delegate starts from a brief, not its parent's history: a goal, and the items given.
    """

    session_id: NotRequired[str | None]
    inherit: NotRequired[dict[str, bool]]
    unit: NotRequired[str | None]
    goal: str
    items: NotRequired[list[dict[str, Any]]]
    format: NotRequired[Literal["responses", "chat", "anthropic"]]


class DroppedFieldBody(TypedDict):
    index: int
    field: str
    """
    Path of the provider field, e.g. `is_error`.
    """


class ElidedEntry(TypedDict):
    first_seq: int
    last_seq: int
    form: Literal["cleared", "truncated", "summarized", "externalized", "dropped", "excluded"]
    """
    cleared (a placeholder), truncated (head and tail), summarized or externalized (a compaction record stands for it), dropped (not shown: a compaction or the window left it out), excluded (normalization left it out).
    """
    tokens_full: int
    """
    Stored tokens of the facts in the range.
    """
    tokens_shown: int
    """
    Tokens the context spends on them: their reduced items, or the record that stands for them (a record standing for several ranges counts in each).
    """
    reason: str
    """
    `compaction <id>`, a plan drop reason (`max_tokens`, `history_cut`), `truncation policy`, or `normalization: <reason>`.
    """


class EndSessionRequest(TypedDict):
    conclusion: NotRequired[dict[str, Any] | None]
    """
    For a child session: the one item appended to its parent.
    """
    format: NotRequired[Literal["responses", "chat", "anthropic"]]


class EndSessionResponse(TypedDict):
    compaction_id: str | None
    hooks: list[dict[str, Any]]
    """
    Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
    """
    conclusion_seq: NotRequired[int | None]


class ErrorBody(TypedDict):
    code: str
    message: str
    details: NotRequired[Any]


class ErrorResponse(TypedDict):
    error: ErrorBody


class EvaluateWatermarks(TypedDict):
    """
    Compaction watermarks, as shares of the usable window; one left out is the session's.
    """

    high: NotRequired[float | None]
    low: NotRequired[float | None]


class EvaluationProgress(TypedDict):
    calls_done: int
    calls_total: int
    """
    The calls the replay makes over all its variants.
    """


class ExcludedItem(TypedDict):
    seq: int
    type: str
    reason: str
    detail: NotRequired[str | None]
    """
    For a `malformed` item, what is wrong with it, in words (`message without role`, `function_call arguments is an object, not text`); null for the other reasons.
    """


class ForkRequest(TypedDict):
    """
    A fork sees its parent's active history as of now: it is given no brief.
    """

    session_id: NotRequired[str | None]
    inherit: NotRequired[dict[str, bool]]
    unit: NotRequired[str | None]


class GoalRequest(TypedDict):
    text: str


class GoalResponse(TypedDict):
    version: int
    seq: int


class GradedGrounding(TypedDict):
    """
    The same measure as the service took it itself, grading each call when its output was
    appended (an assembly's `grounding`).
    """

    calls_needing: int
    needed: int
    visible: int
    calls_seeing_all: int


class HealthResponse(TypedDict):
    status: str


class LoggedItem(TypedDict):
    seq: int
    item: dict[str, Any]
    type: str
    recorded_at: str
    unit: str | None
    phase: str | None
    tokens: int
    metadata: dict[str, Any]
    original: dict[str, Any] | None
    """
    For an item appended as `chat` or `anthropic`: on the first item a message became, `{format, message, parts}` with the message exactly as sent; on the others, `{format, part, message_seq}`. Null for items appended as `responses` (`item` is exactly as sent).
    """
    timeline: int | None
    """
    The PostgreSQL timeline that wrote the item (see the append's `timeline`). Null on SQLite and for items written before timelines were recorded.
    """


class LossCheck(TypedDict):
    missing: list[str]
    fell_back: bool


class LostIdentifier(TypedDict):
    kind: Literal["path", "command", "error"]
    text: str
    seqs: list[int]
    """
    The covered facts that show it, where recall finds it.
    """


class ManifestEntrySpec(TypedDict):
    id: str
    kind: NotRequired[Literal["rule", "source"]]
    content: str
    index: NotRequired[str | None]
    locator: NotRequired[str | None]
    links: NotRequired[list[str]]
    environments: NotRequired[list[str]]


class ManifestVersionResponse(TypedDict):
    name: str
    version: int


MovedItem = TypedDict(
    "MovedItem",
    {
        "id": str,
        "from": int,
        "to": int,
    },
)


class NextActionGrounding(TypedDict):
    """
    How the assembly served the next action its model took: the identifiers (paths, names,
    ids, codes) of the model output appended after it that the history before the call held.
    """

    needed: int
    """
    Identifiers of the output that the history held.
    """
    visible: int
    """
    Of those, the ones in what the assembly sent.
    """
    recallable: int
    """
    Not visible, but in a fact the assembly listed as elided: one recall away.
    """
    neither: int
    """
    Neither visible nor in an elided fact.
    """
    all_visible: bool
    misses_by_form: dict[str, int]
    """
    Identifiers not visible, by the form of the elided facts that held them (`cleared`, `truncated`, `summarized`, `externalized`, `dropped`, `excluded`; `absent` when no elided fact did).
    """
    missed: list[str]
    """
    The first 20 identifiers not visible, sorted.
    """
    ungraded: NotRequired[int]
    """
    Identifiers of the output left ungraded: an output naming more than 5,000 is graded on the first 5,000, sorted.
    """


class PlaceholderBody(TypedDict):
    index: int
    kind: Literal["empty_output", "tool_output_image", "unsupported_part", "leading_user_turn"]


class PlanEntryBody(TypedDict):
    """
    What became of one candidate or history entry. The history entries an assembly leaves
    out are planned as runs, one per reason: `history:<first>-<last>` (a run of one is named as
    its entry, `history:<n>`), with their tokens summed; `elided` names their facts by seq.
    """

    id: str
    source: str
    layer: str
    source_class: str
    decision: Literal["selected", "dropped"]
    reason: str | None
    form: str
    tokens: int
    score: float | None
    position: int | None


class PrefixBreakBody(TypedDict):
    """
    Where a reused prefix broke, and the one cause (`docs/prompt-cache.md`).
    """

    position: int
    """
    The first position not reused.
    """
    item_id: str | None
    """
    The item now at that position (null: none).
    """
    seq: int | None
    """
    The fact seq that item stands for (null: none).
    """
    cause: Literal[
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
    ]
    detail: str
    """
    What changed, in words, with the seqs or versions.
    """


class PrefixFigures(TypedDict):
    left_history_calls: int
    """
    Calls whose messages left the previous call's before the end of its history: a prefix the provider's cache could not serve whole.
    """
    named_breaks: dict[str, int]
    """
    The prefix breaks the service named (`cache.break`), by cause.
    """


class ProviderCacheFigures(TypedDict):
    """
    The simulated provider against the service's own prediction of each call.
    """

    expired_calls: int
    """
    Calls an expired entry would have served more, had it not expired.
    """
    predicted_unexpired_tokens: int
    """
    The service's predicted reused prefix over the calls without expiry, under the provider's minimum prefix and blocks.
    """
    cached_unexpired_tokens: int
    """
    What the provider served of those calls.
    """
    misses: int
    """
    Calls the provider served less than the service predicted.
    """
    misses_by_class: dict[str, int]
    """
    The class the service gave each miss when its usage was reported (`cache_outcome`).
    """
    unclassified_misses: int


class RecallMatchBody(TypedDict):
    seq: int
    line: int
    """
    Line number in the fact's text, counted from 1.
    """
    text: str
    """
    The matching line, or an excerpt around the match.
    """


class RecallRequest(TypedDict):
    """
    One fact in a window (`seq`), or a search (`pattern`) of one fact or a seq range. The
    schema states which fields go together; `from_seq` after `to_seq` it cannot.
    """

    seq: NotRequired[int | None]
    """
    The fact to read (or to search).
    """
    from_line: NotRequired[int]
    """
    First line of the window, counted from 1; for a search, the line of its first fact it starts at (a stopped search's `next_from_line`).
    """
    from_char: NotRequired[int]
    """
    Where in `from_line` the window starts: 0 unless paging through a line longer than `max_tokens` (the previous answer's `next_from_char`).
    """
    max_lines: NotRequired[int]
    """
    Lines in the window, capped by the service.
    """
    max_tokens: NotRequired[int]
    """
    Tokens in the window (exact, session encoding), capped by the service.
    """
    pattern: NotRequired[str | None]
    """
    An RE2 regular expression (no backreferences or lookaround); `^` and `$` match at line ends. With it, the answer lists matching lines instead of a window.
    """
    from_seq: NotRequired[int | None]
    """
    First fact a search covers.
    """
    to_seq: NotRequired[int | None]
    """
    Last fact a search covers.
    """
    max_matches: NotRequired[int]
    """
    Matching lines listed, capped by the service.
    """


class RecallResponse(TypedDict):
    seq: int | None
    """
    The fact read or searched; null for a range search.
    """
    type: str | None
    """
    That fact's type.
    """
    text: str | None
    """
    The window: the fact's text exactly as logged, whole lines; null for a search.
    """
    from_line: int | None
    from_char: int | None
    to_line: int | None
    total_lines: int | None
    tokens: int | None
    """
    Exact tokens of `text` in the session's encoding.
    """
    next_from_line: int | None
    """
    Where the next window starts, or the line of `next_from_seq` a stopped search goes on from; null at the end.
    """
    next_from_char: int | None
    matches: list[RecallMatchBody]
    from_seq: int | None
    """
    First fact the search covered.
    """
    to_seq: int | None
    """
    Last fact the search covered.
    """
    next_from_seq: int | None
    """
    Where a search stopped by a bound goes on (null: it covered the range).
    """
    stopped_by: NotRequired[Literal["max_matches", "max_scan_bytes", "max_scan_seconds"] | None]
    """
    The bound that stopped a search early: `max_matches`, `max_scan_bytes` (the bytes given to the pattern, a byte searched twice counting twice) or `max_scan_seconds` (the CPU time it may take; a pattern RE2 can only run on its slower engine meets it first); null when it covered the range, and for a window.
    """
    scanned_bytes: NotRequired[int | None]
    """
    The bytes a search gave its pattern; null for a window.
    """
    max_scan_bytes: NotRequired[int | None]
    """
    The byte bound a search ran under; null for a window.
    """
    max_scan_seconds: NotRequired[float | None]
    """
    The CPU bound a search ran under; null for a window.
    """
    max_lines: int
    """
    The line bound applied (the request's, capped).
    """
    max_tokens: int
    """
    The token bound applied (the request's, capped).
    """
    max_matches: int
    """
    The match bound applied (the request's, capped).
    """
    tool_output: str
    """
    The answer as the recall tool's output for the model: a header line naming the fact(s) and where to go on, then the window or the matching lines.
    """


class ResetResponse(TypedDict):
    seq: int
    """
    The reset fact's seq; the active history starts after it.
    """


class RetractedItem(TypedDict):
    seq: int
    item: dict[str, Any]
    """
    The hidden item as the log holds it.
    """


class RetractionRequest(TypedDict):
    seq: NotRequired[int | None]
    """
    The item to hide; left out (or null), the newest item the active history shows.
    """


class RetractionResponse(TypedDict):
    seq: int
    """
    The retraction fact's own seq.
    """
    retracted: list[int]
    """
    Every seq hidden: the one asked for, and the call or outputs paired with it.
    """
    items: list[RetractedItem]
    """
    The hidden items, in seq order, as the log holds them (Responses form).
    """


class RoleViewSpec(TypedDict):
    include: NotRequired[list[str] | None]
    exclude: NotRequired[list[str]]


class SessionHooks(TypedDict):
    pre_compact: NotRequired[str | None]
    session_end: NotRequired[str | None]
    failure_policy: NotRequired[Literal["fail_open", "fail_closed"]]
    """
    What a hook timeout or error means for the compaction.
    """


class SourceSpec(TypedDict):
    source: str
    items: list[CandidateSpec]


class TokenizerBody(TypedDict):
    """
    How the session's provider counts against the session's encoding: every window is in
    provider tokens, every exact count in the encoding, and a whole request is estimated as
    `overhead_tokens` + `ratio` × its exact tokens.
    """

    family: Literal["openai", "anthropic", "google", "other"]
    """
    Tokenizer family, from the session's `model`.
    """
    ratio: float
    """
    Provider tokens per encoding token: the family's default until usage reports naming their assembly, spread over enough sizes, identify it.
    """
    overhead_tokens: int
    """
    Provider tokens every request has beyond what contextd assembled (tool definitions, system prompt framing, per-message formatting), fitted from usage reports; 0 until they show one. At most half of `usable_window`.
    """
    calibrated: bool
    """
    Whether any usage report has calibrated the session.
    """
    samples: int
    """
    Usage reports that calibrated the session.
    """
    exact: bool
    """
    An OpenAI model counted in its own encoding: `ratio` is 1, always (`overhead_tokens` is still fitted).
    """


class TruncationSpec(TypedDict):
    mode: NotRequired[Literal["tokens", "bytes"]]
    limit: NotRequired[int]
    serialization_margin: NotRequired[float]


class UsageRequest(TypedDict):
    input_tokens: NotRequired[int]
    cached_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    unit: NotRequired[str | None]
    phase: NotRequired[str | None]
    assembly_id: NotRequired[str | None]


class VariantSettings(TypedDict):
    """
    What a variant ran with, every setting resolved.
    """

    context_window: int
    strategy: Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"] | None
    """
    null: the advice's recommendation.
    """
    high_watermark: float
    low_watermark: float
    keep_recent: int
    follow_advice: bool
    recall_tool: bool
    cache: dict[str, int | float]
    """
    The session's `cache` terms the service was told.
    """
    summarizer: Literal["builtin", "client"]


class WorkingSetEntry(TypedDict):
    seq: int
    reason: str


class WorldStateRequest(TypedDict):
    sections: dict[str, Any]
    """
    The whole current world state, by section id; a section left out is removed. A null member of an object means absent (as in a merge patch), except inside an array, which is kept whole.
    """


class WorldStateResponse(TypedDict):
    version: int
    updates: list[dict[str, Any]]
    changes: list[dict[str, str]]
    patch: dict[str, Any] | None


class AdviceBody(TypedDict):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: NotRequired[int | None]
    recommended_strategy: NotRequired[str | None]
    cache: NotRequired[AdviceCacheBody | None]
    """
    The compaction priced by the lineage's prompt cache (null: not priced, as for a stateless call).
    """


class AdviceResponse(TypedDict):
    should_compact: bool
    pressure: float
    reasons: list[dict[str, Any]]
    turns_until_full: int | None
    recommended_strategy: str | None
    cache: AdviceCacheBody | None
    """
    The compaction priced by the lineage's prompt cache.
    """
    active_tokens: int
    """
    Exact tokens the pressure weighs: the history without state fragments and the pinned state (goal, its restatement, world state).
    """
    provider_tokens_estimate: int
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    tokenizer: TokenizerBody


class AppendResponse(TypedDict):
    first_seq: int
    last_seq: int
    items: list[AppendedItem]
    excluded: list[ExcludedItem]
    """
    Appended items kept in the log but excluded from model-visible history.
    """
    timeline: NotRequired[int | None]
    """
    The PostgreSQL timeline that wrote these items (a promoted standby writes on a higher one). Keep it with the seqs: an item that later reads back at one of them with another timeline is not this one (the append was lost in an asynchronous failover and its seq given again). Null on SQLite.
    """


class AssembleRequest(TypedDict):
    session_id: NotRequired[str | None]
    sources: NotRequired[list[SourceSpec]]
    budget: NotRequired[BudgetSpec | None]
    policy: NotRequired[Literal["balanced", "compact", "expansive"]]
    placement: NotRequired[Literal["edges", "input_order"]]
    min_relevance: NotRequired[float]
    encoding: NotRequired[Literal["o200k_base", "cl100k_base"] | None]
    unit: NotRequired[str | None]
    phase: NotRequired[str | None]
    output_format: NotRequired[Literal["responses", "chat", "anthropic"]]
    input_modalities: NotRequired[list[Literal["text", "image", "audio"]]]
    manifest: NotRequired[str | None]
    role: NotRequired[str | None]
    environment: NotRequired[str | None]
    recall_tool: NotRequired[bool | None]
    """
    Offer the recall tool in `tools` (session mode); null: the session's setting, on unless the session was created with `recall_tool: false`.
    """


class AssemblyDiffBody(TypedDict):
    added: list[str]
    removed: list[str]
    moved: list[MovedItem]
    tokens_delta: int
    prefix_break: NotRequired[PrefixBreakBody | None]
    """
    Where and why the replayed context's prompt prefix would break against the original assembly's (as `cache.break` names it between calls); null when the replay reuses the original's whole history.
    """


CacheBody = TypedDict(
    "CacheBody",
    {
        "reused_prefix_tokens": int,
        "new_tokens": int,
        "reused_prefix_items": int,
        "last_reused_item_id": str | None,
        "break": NotRequired[PrefixBreakBody | None],
    },
)


class CompactedIdentifiers(TypedDict):
    """
    The file paths, shell commands and error signatures of the range a compaction covered,
    and those the new history no longer lets the agent find: not visible, no item showing them
    kept verbatim, none replaced by a placeholder naming its fact (recall still reads them).
    """

    found: int
    kept: int
    lost: list[LostIdentifier]
    """
    The first 50 lost, in the order found.
    """
    lost_total: int


class ContextWindowResponse(TypedDict):
    """
    The current active context against the session's window.
    """

    session_id: str
    context_window: int
    usable_window: int
    """
    Provider tokens a session-mode call may fill.
    """
    window_tokens: int
    """
    The usable window in the session's encoding, beside the overhead: floor((usable_window - overhead_tokens) / ratio), what assembly fits.
    """
    active_tokens: int
    """
    Exact tokens of the active context.
    """
    provider_tokens_estimate: int
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    by_source_class: dict[str, int]
    """
    `active_tokens` by source class: `history` (without state fragments), `goal` (with its restatement), `world_state`.
    """
    pressure: float
    """
    active_tokens / window_tokens, as advice weighs it.
    """
    tokenizer: TokenizerBody


class ConversionReportBody(TypedDict):
    """
    What the output format could not carry. `index` is the item's position in the
    Responses-form list converted (for `/assemble`, its `position`).
    """

    excluded: list[dict[str, Any]]
    """
    Items left out: `{index, type, reason}`, reason `foreign_reasoning` (opaque reasoning of another provider) or `not_expressible`.
    """
    dropped_fields: list[DroppedFieldBody]
    """
    Provider fields of items read in another format that this format has no place for (e.g. Anthropic `is_error` written as Chat).
    """
    placeholders: list[PlaceholderBody]
    """
    Content replaced by a short text the provider accepts: an empty tool output, an image in a Chat tool output (the image follows in a user message), a part the format cannot carry, or the user turn opening an Anthropic history.
    """


class CreateSessionRequest(TypedDict):
    session_id: NotRequired[str | None]
    encoding: NotRequired[Literal["o200k_base", "cl100k_base"] | None]
    context_window: NotRequired[int | None]
    model: NotRequired[str | None]
    metadata: NotRequired[dict[str, Any]]
    hooks: NotRequired[SessionHooks]
    compaction: NotRequired[CompactionOptions]
    cache: NotRequired[CacheOptions]
    recall_tool: NotRequired[bool]
    """
    Whether session-mode `/assemble` offers the recall tool in `tools` (a request's own `recall_tool` overrides it).
    """


class EvaluateVariant(TypedDict):
    """
    One way to run the session. Every field but `name` left out is the session's own.
    """

    name: str
    context_window: NotRequired[int | None]
    strategy: NotRequired[
        Literal["clear_tool_results", "truncate", "summary", "handoff", "notes"] | None
    ]
    """
    The strategy every advised compaction uses; left out, the one the advice recommends.
    """
    watermarks: NotRequired[EvaluateWatermarks | None]
    keep_recent: NotRequired[int | None]
    """
    Each compaction's `keep_recent`.
    """
    follow_advice: NotRequired[bool]
    """
    false: the runtime never compacts (the window's fitting does all the work).
    """
    recall_tool: NotRequired[bool | None]
    summarizer: NotRequired[Literal["builtin", "client"]]
    """
    `client`: each product record's summary is the narrative the log recorded where the session compacted with a summarizer of its own (the newest before the replayed compaction, each used once), else the built-in one. The replay calls no summarizer.
    """
    cache: NotRequired[CacheOptions | None]
    """
    Prompt-cache terms to tell the service, over the session's own: its advice prices the cache by them. The simulated provider keeps the session's terms, so a variant that tells the service no cache discount (`read_price` 1) shows what advice blind to the cache would cost.
    """


class EvaluationGrounding(TypedDict):
    """
    Of the identifiers each call's own output went on to use that the history before it
    held (the goal's left out): how many the context showed, how many only an elided fact
    held (one recall away), and how many it held nowhere.
    """

    calls_needing: int
    """
    Calls whose output used any such identifier.
    """
    needed: int
    visible: int
    recallable: int
    missed: int
    visible_share: float
    all_visible_calls: float
    """
    Share of `calls_needing` that saw them all.
    """
    calls_seeing_all: int
    """
    Of `calls_needing`, those that saw them all.
    """
    misses_by_form: dict[str, int]
    """
    The recallable ones, by the form of the `elided` entry holding them (`summarized`, `cleared`, `dropped`, `truncated`, ...).
    """
    calls_hiding: int
    """
    Calls whose context elided anything.
    """
    calls_naming_every_seq: int
    """
    Of `calls_hiding`, those whose visible text names every elided entry's first seq (what a recall starts from).
    """
    recall_checked: int
    """
    Recallable identifiers searched for with `/recall` over their entry's range.
    """
    recall_confirmed: int
    """
    Of those, the ones the search handed back.
    """
    graded: GradedGrounding


class ItemsPageResponse(TypedDict):
    items: list[LoggedItem]
    next_after_seq: int | None


class ManifestRequest(TypedDict):
    entries: list[ManifestEntrySpec]
    roles: NotRequired[dict[str, RoleViewSpec]]
    priorities: NotRequired[list[str]]


class ManifestResponse(TypedDict):
    entries: list[ManifestEntrySpec]
    roles: NotRequired[dict[str, RoleViewSpec]]
    priorities: NotRequired[list[str]]
    name: str
    version: int


class NormalizeReportBody(TypedDict):
    synthesized_outputs: list[dict[str, Any]]
    removed_orphans: list[dict[str, Any]]
    reordered_outputs: list[dict[str, Any]]
    deduplicated_outputs: list[dict[str, Any]]
    stripped_media: list[dict[str, Any]]
    truncated_outputs: list[dict[str, Any]]
    excluded: list[dict[str, Any]]
    """
    Items kept out: by admission (`index` in the input) and by the output format (`foreign_reasoning`, `not_expressible`: `index` in the normalized list).
    """
    dropped_fields: list[DroppedFieldBody]
    placeholders: list[PlaceholderBody]


class NormalizeRequest(TypedDict):
    """
    Either `items` (stateless) or `session_id` (that session's active history).
    """

    items: NotRequired[list[dict[str, Any]] | None]
    session_id: NotRequired[str | None]
    format: NotRequired[Literal["responses", "chat", "anthropic"]]
    output_format: NotRequired[Literal["responses", "chat", "anthropic"] | None]
    input_modalities: NotRequired[list[Literal["text", "image", "audio"]]]
    truncation: NotRequired[TruncationSpec]
    encoding: NotRequired[Literal["o200k_base", "cl100k_base"] | None]


class NormalizeResponse(TypedDict):
    items: list[dict[str, Any]]
    system: list[dict[str, Any]] | None
    """
    Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
    """
    tokens: int
    """
    Exact tokens of the returned items' model-visible text.
    """
    report: NormalizeReportBody
    untranslated: list[int]
    """
    Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
    """


class ReplayOverrides(TypedDict):
    budget: NotRequired[BudgetSpec | None]
    policy: NotRequired[Literal["balanced", "compact", "expansive"] | None]
    placement: NotRequired[Literal["edges", "input_order"] | None]
    min_relevance: NotRequired[float | None]
    drop_sources: NotRequired[list[str]]
    replace_sources: NotRequired[list[SourceSpec]]


class ReplayRequest(TypedDict):
    overrides: NotRequired[ReplayOverrides]


class SessionDetailResponse(TypedDict):
    session_id: str
    encoding: str
    context_window: int
    usable_window: int
    """
    Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
    """
    model: str | None
    metadata: dict[str, Any]
    hooks: SessionHooks
    compaction: CompactionOptions
    cache: CacheTermsBody
    recall_tool: bool
    """
    Whether assemblies offer the recall tool.
    """
    tokenizer: TokenizerBody
    created_at: str
    last_seq: int
    item_count: int
    active_tokens: int
    provider_tokens_estimate: int
    """
    Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
    """
    goal: dict[str, Any] | None
    world_state_version: int
    compactions: int


class SessionResponse(TypedDict):
    session_id: str
    encoding: str
    context_window: int
    usable_window: int
    """
    Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
    """
    model: str | None
    metadata: dict[str, Any]
    hooks: SessionHooks
    compaction: CompactionOptions
    cache: CacheTermsBody
    recall_tool: bool
    """
    Whether assemblies offer the recall tool.
    """
    tokenizer: TokenizerBody
    created_at: str
    last_seq: int


class VariantResult(TypedDict):
    name: str
    settings: VariantSettings
    calls: int
    input_tokens: int
    reused_tokens: int
    """
    Tokens of the leading messages identical to the previous call's.
    """
    reuse: float
    fresh_tokens: int
    cached_tokens: int
    """
    What a simulated provider cache served.
    """
    written_tokens: int
    """
    What it wrote into its cache.
    """
    cost: float
    """
    In fresh input tokens, in the session's cache terms: uncached input at 1, cached at the read price, the write premium on what is written.
    """
    compactions: int
    compactions_per_100: float
    recorded_summaries: int
    """
    Compactions whose record used the summary the log recorded (`client`).
    """
    peak_tokens: int
    goal_calls: int
    """
    Calls with a goal to keep.
    """
    goal_kept: float | None
    """
    Share of `goal_calls` showing the goal (null: none).
    """
    goal_kept_calls: int
    pairing_kept: float
    """
    Share of calls whose tool calls and outputs pair.
    """
    pairing_kept_calls: int
    over_budget_calls: int
    grounding: EvaluationGrounding
    predicted_reused_tokens: int
    """
    The reused prefix the service predicted (`cache.reused_prefix_tokens`), summed.
    """
    restated_tokens: int
    """
    Tokens of the goal's restatement at the end, summed.
    """
    history_cut_calls: int
    """
    Calls whose assembly had to cut the history: its oldest items left the context without a compaction's record of them.
    """
    prefix: PrefixFigures
    provider_cache: ProviderCacheFigures


class AssembleResponse(TypedDict):
    """
    `items` carry each selected candidate (history items in Responses form); `messages` is
    the whole selected context converted to the requested `output_format`.
    """

    assembly_id: str
    plan_hash: str
    total_tokens: int
    provider_tokens_estimate: NotRequired[int | None]
    """
    Session mode: estimate (not exact) of the provider's count of the whole request `total_tokens` are sent in, ceil(`tokenizer.overhead_tokens` + total_tokens × `tokenizer.ratio`), the overhead included.
    """
    encoding: NotRequired[str | None]
    """
    The encoding `total_tokens` and every count here are in.
    """
    tokenizer: NotRequired[TokenizerBody | None]
    """
    Session mode: the session's tokenizer as of this call.
    """
    truncated: bool
    """
    Whether the budget left something out: a candidate dropped for `max_items`, `max_tokens` (of the whole or of its source) or `recall_cap`, or history not shown. Drops for relevance, duplicates, superseded contributions or a missing attribution do not count.
    """
    over_budget: bool
    items: list[AssembledItem]
    plan: list[PlanEntryBody]
    by_source_class: dict[str, int]
    cache: CacheBody
    advice: AdviceBody
    budget: BudgetSpec
    """
    The effective budget after policy and overrides.
    """
    startup_tokens: int
    """
    Tokens of the required stable prefix.
    """
    unit: str | None
    """
    Execution unit the tokens are accounted to.
    """
    messages: list[dict[str, Any]]
    """
    Every selected item in position order, in `output_format`, ready to send: text candidates as developer messages, history items as they are. Anthropic: the leading ones are in `system`, later ones are user-turn text blocks.
    """
    system: list[dict[str, Any]] | None
    """
    Anthropic output: the top-level `system` text blocks (instructions, rules, the pinned goal, world state). Null for `chat` and `responses`.
    """
    cache_breakpoints: list[CacheBreakpointBody]
    """
    Anthropic output: the blocks given `cache_control` (at most four with any the client sent), and why.
    """
    prompt_cache_key: str | None
    """
    `chat`/`responses` output of a session: a stable key per session and unit to pass as the request's `prompt_cache_key`, so calls of one lineage share a cache.
    """
    conversion: ConversionReportBody
    tools: NotRequired[list[dict[str, Any]]]
    """
    Session mode: the tools contextd defines, in `output_format` (the recall tool, unless `recall_tool` is off), to send beside the runtime's own. Byte-identical on every call of a session.
    """
    elided: NotRequired[list[ElidedEntry]]
    """
    Session mode: every fact of the session's history the context shows reduced or not at all, as seq ranges of one form and reason, in seq order. The visible text names each range's first seq; `POST /sessions/{id}/recall` reads any of them back.
    """
    tools_tokens: NotRequired[int]
    """
    Tokens of `tools` as JSON. They are kept out of the window the context may fill, and counted as pinned by the advice, as far as the session's fitted overhead (`tokenizer.overhead_tokens`, learnt from usage reports that count them) does not hold them already.
    """


class CompactResponse(TypedDict):
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
    system: list[dict[str, Any]] | None
    """
    Anthropic output: the history's leading system and developer messages (the re-anchored invariants) as top-level `system` text blocks.
    """
    conversion: ConversionReportBody
    loss_check: LossCheck
    target_tokens: NotRequired[int | None]
    """
    The target the strategy compacted toward (null: none).
    """
    over_target_because: NotRequired[str | None]
    """
    Why `tokens_after` is over `target_tokens`, what each kept part takes; null when it is within.
    """
    identifiers: NotRequired[CompactedIdentifiers | None]
    """
    Null when nothing was compacted.
    """
    hooks: list[dict[str, Any]]
    """
    Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
    """
    summarization_prompt: NotRequired[str | None]
    summarizer: dict[str, Any]
    noop: bool
    dry_run: bool
    applied: bool
    """
    Whether a compaction fact was written.
    """
    not_applied_because: Literal["dry_run", "stateless", "noop", "too_little_gain"] | None
    """
    Why nothing was written: `dry_run`, `stateless` (items given), `noop` (nothing to compact) or `too_little_gain` (the plan frees less than `CTX_COMPACTION_MIN_GAIN` of the active history).
    """
    recommended_strategy: NotRequired[str | None]
    """
    When the requested strategy found nothing to do or freed too little: the strategy the session's advice recommends now, which would (null when it is the one requested or none is advised). With `fallback`, it is the one planned.
    """


class EvaluateRequest(TypedDict):
    variants: NotRequired[list[EvaluateVariant]]


class EvaluateResponse(TypedDict):
    session_id: str
    last_seq: int
    """
    The log was replayed up to this seq.
    """
    calls: int
    """
    Model calls in the log: where a run of model output starts.
    """
    variants: list[VariantResult]
    """
    `current` first, then the request's.
    """


class EvaluationJobResponse(TypedDict):
    """
    An evaluation run as a job: `GET /evaluations/{id}` while it runs, and after.
    """

    evaluation_id: str
    session_id: str
    status: Literal["running", "done", "failed", "cancelled"]
    progress: EvaluationProgress
    result: EvaluateResponse | None
    """
    The evaluation, once `done`.
    """
    error: str | None
    """
    Why it `failed`: the replay's error, the service stopping, or the job lost with its process (a restart).
    """
    created_at: str
    updated_at: str
    """
    When its runner last wrote its progress.
    """


class HistoryResponse(TypedDict):
    items: list[dict[str, Any]]
    system: list[dict[str, Any]] | None
    """
    Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
    """
    tokens: int
    """
    Exact tokens of the returned items' model-visible text.
    """
    report: NormalizeReportBody
    untranslated: list[int]
    """
    Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
    """
    compaction_id: str | None


class ReplayResponse(TypedDict):
    assembly: AssembleResponse
    diff: AssemblyDiffBody


class StoredAssemblyResponse(TypedDict):
    assembly_id: str
    created_at: str
    session_id: str | None
    request: dict[str, Any]
    response: AssembleResponse
    grounding: NotRequired[NextActionGrounding | None]
    """
    Session mode: how the assembly served its model's next action, graded when that output was appended (the first model output after it, in the same unit); null until then.
    """
    cache_outcome: NotRequired[
        Literal["as_predicted", "below_minimum", "expired", "evicted", "more_than_predicted"] | None
    ]
    """
    The provider's prompt-cache outcome against `cache.reused_prefix_tokens`, classified when a usage report named this assembly (the latest report's): `as_predicted`, `below_minimum`, `expired` (idle past the TTL), `evicted` (within it), `more_than_predicted`; null until then.
    """
