"""Every Prometheus metric of the service, defined once.

Label values are bounded: routes are path templates, never raw paths; item types are the
known ones or 'other'; units and phases are capped per tenant and overall (`LabelCap`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import ParamSpec, get_args

from prometheus_client import Counter, Histogram

from app.domain.assemble import AssemblyPlan
from app.domain.calibration import Family
from app.domain.grounding import ActionGrounding
from app.domain.items import KNOWN_TYPES, CountTokens
from app.domain.prompt_cache import MISSES, CacheOutcome
from app.hooks import FailureReason, HookResult
from app.tracing import exemplar

_P = ParamSpec("_P")
_muted: ContextVar[bool] = ContextVar("contextd_metrics_muted", default=False)


@contextlib.contextmanager
def muted() -> Iterator[None]:
    """Within the block (in this context: this thread, or this task), the `record_*`
    functions record nothing: work done on a scratch copy (an evaluation's replay) is not the
    service's traffic."""
    token = _muted.set(True)
    try:
        yield
    finally:
        _muted.reset(token)


def _unless_muted(record: Callable[_P, None]) -> Callable[_P, None]:
    @functools.wraps(record)
    def recording(*args: _P.args, **kwargs: _P.kwargs) -> None:
        if not _muted.get():
            record(*args, **kwargs)

    return recording


def is_muted() -> bool:
    """Whether metrics are muted here (see `muted`), for a metric observed outside `record_*`."""
    return _muted.get()


HTTP_REQUESTS = Counter(
    "contextd_http_requests_total", "HTTP requests answered.", ["method", "route", "status"]
)
HTTP_LATENCY = Histogram(
    "contextd_http_request_duration_seconds",
    "Server-side latency of HTTP requests.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
APPENDED_ITEMS = Counter("contextd_appended_items_total", "Items appended to fact logs.", ["type"])
APPENDED_TOKENS = Counter(
    "contextd_appended_tokens_total",
    "Exact tokens of appended items, by execution unit and phase.",
    ["unit", "phase"],
)
DATABASE_UNAVAILABLE = Counter(
    "contextd_database_unavailable_total", "Requests answered 503 because the database was down."
)
AFTER_ANSWER_FAILURES = Counter(
    "contextd_after_answer_failures_total",
    "Work that failed after a request was answered, or while its error was being answered "
    "(logged; the answer stands and the connection stays open), by step: closing the "
    "request's database session, or the work an answer finishes after it is sent.",
    ["step"],
)
NORMALIZE_REPAIRS = Counter(
    "contextd_normalize_repairs_total",
    "Repairs made while normalizing histories, by kind of repair.",
    ["kind"],
)

# Assembly: the three cost axes. Every token handed out is counted once per
# (source_class, cache, unit, phase); `sum by` any one label gives that axis.
CONTEXT_TOKENS = Counter(
    "contextd_context_tokens_total",
    "Tokens handed out by /assemble, by source class, cache status (reused_prefix|new), "
    "execution unit and phase.",
    ["source_class", "cache", "unit", "phase"],
)
PROVIDER_TOKENS = Counter(
    "contextd_provider_tokens_total",
    "Provider-reported usage (cached|uncached input, output), by execution unit and phase.",
    ["kind", "unit", "phase"],
)
# Prediction against outcome: both counted only for usage reports that name their assembly,
# under the same labels, so their ratio is the share of the predicted prefix the provider hit.
CACHE_PREDICTED_TOKENS = Counter(
    "contextd_cache_predicted_tokens_total",
    "Reused-prefix tokens /assemble predicted, for the assemblies whose provider usage was "
    "reported with their assembly_id, by execution unit and phase.",
    ["unit", "phase"],
)
CACHE_OUTCOMES = Counter(
    "contextd_cache_outcomes_total",
    "Usage reports naming an assembly, by the class of the provider's cache outcome against "
    "its prediction (app.domain.prompt_cache.CacheOutcome).",
    ["outcome", "unit"],
)
CACHE_MISSES = Counter(
    "contextd_cache_misses_total",
    "Usage reports whose provider served less of the prompt cache than predicted, by why: "
    "below_minimum (the prefix under the provider's minimum), expired (idle past the TTL), "
    "evicted (within the TTL, yet missed).",
    ["reason", "unit"],
)
CACHE_ACTUAL_TOKENS = Counter(
    "contextd_cache_actual_tokens_total",
    "Cached input tokens the provider reported for those same assemblies, by execution unit "
    "and phase.",
    ["unit", "phase"],
)
# Calibration of provider tokens (overhead + ratio × exact tokens), labelled by tokenizer family
# only (four values; never a session or model name). Observed for each usage report that
# calibrates, the ratio and overhead as fitted after it.
CALIBRATION_OBSERVED = Histogram(
    "contextd_calibration_observed_ratio",
    "Provider tokens per exact assembled token (the fitted slope) after each usage report "
    "that calibrates a session, by tokenizer family.",
    ["family"],
    buckets=(0.75, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2.0, 2.5, 5.0),
)
CALIBRATION_OVERHEAD = Histogram(
    "contextd_calibration_overhead_tokens",
    "Provider tokens of every request beyond what was assembled (tool definitions, framing), "
    "as fitted after each usage report that calibrates a session, by tokenizer family.",
    ["family"],
    buckets=(0, 500, 1000, 2000, 5000, 10_000, 15_000, 20_000, 30_000, 50_000, 100_000),
)
CALIBRATION_DRIFT = Histogram(
    "contextd_calibration_drift_ratio",
    "|predicted - reported| / reported provider input tokens of those reports, the prediction "
    "the session's budgets assumed for the whole request before the report, by tokenizer "
    "family.",
    ["family"],
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0),
)
for _family in get_args(Family):  # every family's series exists from the first scrape
    CALIBRATION_OBSERVED.labels(_family)
    CALIBRATION_OVERHEAD.labels(_family)
    CALIBRATION_DRIFT.labels(_family)
ASSEMBLY_LATENCY = Histogram(
    "contextd_assembly_duration_seconds",
    "Server-side time to answer /assemble (selection, placement, and storage where the plan "
    "is stored before answering).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
PLAN_STORE_LATENCY = Histogram(
    "contextd_plan_store_duration_seconds",
    "Time to write a stored plan after its response was sent.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
CHECKPOINTS = Counter(
    "contextd_checkpoints_total",
    "Session checkpoint links by outcome: written after an answer, whole or as a delta against "
    "the link before; restored by a worker that had no fold of the session (restored_index: the "
    "grader's occurrence index a whole link holds, read by that worker's first grade); or "
    "refused before "
    "use (corrupt, derived by other code, derived from a log that no longer holds its last "
    "fact, a chain missing a link, malformed) and the log folded instead.",
    ["outcome"],
)
CHECKPOINT_WRITE_LATENCY = Histogram(
    "contextd_checkpoint_write_duration_seconds",
    "Time to derive and write a session's checkpoint link after an assembly's response was "
    "sent, by its form (whole, delta).",
    ["form"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
PLAN_STORE_FAILURES = Counter(
    "contextd_plan_store_failures_total",
    "Plans answered but not stored because the database refused or was unreachable.",
)
ASSEMBLY_SIZE = Histogram(
    "contextd_assembly_tokens",
    "Tokens per assembled context.",
    buckets=(256, 1024, 4096, 16384, 32768, 65536, 131072, 262144, 524288, 1048576),
)
ASSEMBLY_DECISIONS = Counter(
    "contextd_assembly_candidates_total",
    "Assembly candidates by decision and drop reason (reason 'none' when selected).",
    ["decision", "reason"],
)
ASSEMBLY_FLAGS = Counter(
    "contextd_assembly_flags_total",
    "Assemblies that were truncated or went over budget because of required items.",
    ["flag"],
)
ASSEMBLY_PREFIX_TOKENS = Counter(
    "contextd_assembly_startup_tokens_total",
    "Tokens of the required stable prefix (fixed start-up cost), by execution unit.",
    ["unit"],
)
TOKEN_ESTIMATE_ERROR = Histogram(
    "contextd_token_estimate_error_ratio",
    "|caller estimate - exact count| / exact count, for selected items whose tokens were given.",
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
)


class LabelCap:
    """Caps a caller-chosen label (units, phases): each tenant's first `per_tenant` distinct
    values, and at most `overall` values in all, are kept; later ones read 'other'.

    Caller-chosen values would otherwise create unbounded series, and a process-wide cap would
    let one tenant's names crowd out every other tenant's.
    """

    def __init__(self, *, per_tenant: int, overall: int) -> None:
        self.per_tenant = per_tenant
        self.overall = overall
        self.seen: dict[int, set[str]] = {}
        self.values: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, value: str | None, *, tenant: int) -> str:
        if not value:
            return "none"
        with self.lock:
            own = self.seen.setdefault(tenant, set())
            if value in own:
                return value
            if len(own) < self.per_tenant and (
                value in self.values or len(self.values) < self.overall
            ):
                own.add(value)
                self.values.add(value)
                return value
        return "other"


UNIT_LABEL = LabelCap(per_tenant=50, overall=1000)
PHASE_LABEL = LabelCap(per_tenant=50, overall=1000)


def item_type_label(kind: str) -> str:
    """An item's type as a label: the types the service knows, else 'other' (callers may send
    any type, and each would be a series for ever)."""
    return kind if kind in KNOWN_TYPES else "other"


COMPACTIONS = Counter(
    "contextd_compactions_total",
    "Compactions written, by the strategy applied and whether it was requested or a fallback.",
    ["strategy", "outcome"],
)
COMPACTION_FALLBACKS = Counter(
    "contextd_compaction_fallbacks_total",
    "Lossy compactions whose loss check fired, by requested strategy.",
    ["strategy"],
)
COMPACTION_TOKENS_SAVED = Counter(
    "contextd_compaction_tokens_saved_total",
    "Active-history tokens removed by compactions, by strategy.",
    ["strategy"],
)
RECALLS = Counter(
    "contextd_recalls_total",
    "Recalls answered, by execution unit, mode (window|search) and outcome: found (a window, "
    "or a search with matches), no_match (a search without) or not_found (no such seq).",
    ["unit", "mode", "outcome"],
)
RECALL_TOKENS = Counter(
    "contextd_recall_tokens_total",
    "Tokens of the recall tool outputs handed back (session encoding), by execution unit.",
    ["unit"],
)
NEXT_ACTION_IDENTIFIERS = Counter(
    "contextd_next_action_identifiers_total",
    "Identifiers a model's next action used that the history before its call held, by unit and"
    " by what the call's assembly made of them: visible, recallable (only in a fact it listed as"
    " elided) or neither. visible / all is the next-action grounding.",
    ["unit", "outcome"],
)
NEXT_ACTION_MISSES = Counter(
    "contextd_next_action_misses_total",
    "Identifiers a next action used that its assembly did not show, by unit and by the form of"
    " the elided facts holding them (cleared, truncated, summarized, externalized, dropped,"
    " excluded; absent when none did).",
    ["unit", "form"],
)
NEXT_ACTION_CALLS = Counter(
    "contextd_next_action_calls_total",
    "Graded model calls whose next action used any identifier of the history, by unit and by"
    " whether every one of them was visible.",
    ["unit", "all_visible"],
)
HOOK_CALLS = Counter(
    "contextd_hook_calls_total",
    "Lifecycle hook calls, by event, outcome and, for a failed call or one not made, the reason "
    f"({', '.join(get_args(FailureReason))}; empty otherwise).",
    ["event", "outcome", "reason"],
)


@_unless_muted
def record_assembly(
    plan: AssemblyPlan,
    *,
    assembly_id: str,
    reused_prefix_tokens: int,
    startup_tokens: int,
    unit: str | None,
    phase: str | None,
    given_tokens: Mapping[tuple[str, str], int],
    count_tokens: CountTokens,
    tenant: int,
) -> None:
    """One assembly's cost on the three axes, its decisions and flags, and the error of the
    caller's token estimates (`given_tokens[source, id]`) against exact counts."""
    unit_label, phase_label = UNIT_LABEL(unit, tenant=tenant), PHASE_LABEL(phase, tenant=tenant)
    reused_left = reused_prefix_tokens
    # Summed per label set first: a label lookup costs more than the addition.
    handed_out: Tally[tuple[str, str]] = Tally()
    for item in plan.items:
        # Items of the reused prefix come first: attribute their tokens to the cache axis.
        reused_part = min(reused_left, item.tokens)
        reused_left -= reused_part
        handed_out[item.source_class, "reused_prefix"] += reused_part
        handed_out[item.source_class, "new"] += item.tokens - reused_part
    for (source_class, cache), tokens in sorted(handed_out.items()):
        if tokens:
            CONTEXT_TOKENS.labels(source_class, cache, unit_label, phase_label).inc(tokens)
    decisions = Tally((entry["decision"], entry["reason"] or "none") for entry in plan.plan)
    for (decision, reason), count in sorted(decisions.items()):
        ASSEMBLY_DECISIONS.labels(decision, reason).inc(count)
    for flag, raised in (("truncated", plan.truncated), ("over_budget", plan.over_budget)):
        if raised:
            ASSEMBLY_FLAGS.labels(flag).inc()
    ASSEMBLY_SIZE.observe(plan.total_tokens, exemplar=exemplar(assembly_id=assembly_id))
    ASSEMBLY_PREFIX_TOKENS.labels(unit_label).inc(startup_tokens)
    # Only selected raw texts are compared: exact counts of the rest would cost more.
    for item in plan.items:
        estimate = given_tokens.get((item.source, item.id))
        if estimate is not None and item.form == "raw" and item.content is not None:
            exact = count_tokens(item.content)
            if exact:
                TOKEN_ESTIMATE_ERROR.observe(abs(estimate - exact) / exact)


@_unless_muted
def record_checkpoint(outcome: str) -> None:
    """A checkpoint restored or refused (`CHECKPOINTS`)."""
    CHECKPOINTS.labels(outcome).inc()


def record_checkpoint_written(form: str, seconds: float) -> None:
    """A checkpoint link written (`form`: whole, delta), and how long it took."""
    CHECKPOINTS.labels(f"written_{form}").inc()
    CHECKPOINT_WRITE_LATENCY.labels(form).observe(seconds)


@_unless_muted
def record_plan_store(seconds: float | None) -> None:
    """A plan written after its answer: how long it took, or (None) that it failed."""
    if seconds is None:
        PLAN_STORE_FAILURES.inc()
    else:
        PLAN_STORE_LATENCY.observe(seconds)


@_unless_muted
def record_provider_usage(
    *,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    unit: str | None,
    phase: str | None,
    tenant: int,
) -> None:
    """Provider-reported usage, on the cache-status axis of the cost metrics."""
    unit_label, phase_label = UNIT_LABEL(unit, tenant=tenant), PHASE_LABEL(phase, tenant=tenant)
    PROVIDER_TOKENS.labels("cached", unit_label, phase_label).inc(cached_tokens)
    PROVIDER_TOKENS.labels("uncached", unit_label, phase_label).inc(
        max(0, input_tokens - cached_tokens)
    )
    PROVIDER_TOKENS.labels("output", unit_label, phase_label).inc(output_tokens)


@_unless_muted
def record_cache_outcome(
    *,
    predicted_tokens: int,
    actual_tokens: int,
    outcome: CacheOutcome,
    unit: str | None,
    phase: str | None,
    tenant: int,
) -> None:
    """One assembly's predicted reused prefix against the cached tokens its provider reported,
    and the class of a miss."""
    unit_label, phase_label = UNIT_LABEL(unit, tenant=tenant), PHASE_LABEL(phase, tenant=tenant)
    CACHE_PREDICTED_TOKENS.labels(unit_label, phase_label).inc(predicted_tokens)
    CACHE_ACTUAL_TOKENS.labels(unit_label, phase_label).inc(actual_tokens)
    CACHE_OUTCOMES.labels(outcome, unit_label).inc()
    if outcome in MISSES:
        CACHE_MISSES.labels(outcome, unit_label).inc()


@_unless_muted
def record_calibration(*, family: Family, ratio: float, overhead: int, drift: float) -> None:
    """One usage report that calibrated a session: the ratio and overhead fitted after it,
    and how far the prediction before it was off."""
    CALIBRATION_OBSERVED.labels(family).observe(ratio)
    CALIBRATION_OVERHEAD.labels(family).observe(overhead)
    CALIBRATION_DRIFT.labels(family).observe(drift)


@_unless_muted
def record_append(
    types: Iterable[str], *, tokens: int, unit: str | None, phase: str | None, tenant: int
) -> None:
    for kind, count in sorted(Tally(item_type_label(kind) for kind in types).items()):
        APPENDED_ITEMS.labels(kind).inc(count)
    APPENDED_TOKENS.labels(UNIT_LABEL(unit, tenant=tenant), PHASE_LABEL(phase, tenant=tenant)).inc(
        tokens
    )


@_unless_muted
def record_repairs(report: Mapping[str, Sequence[object]]) -> None:
    for kind, entries in report.items():
        if entries:
            NORMALIZE_REPAIRS.labels(kind).inc(len(entries))


@_unless_muted
def record_compaction(
    *, strategy: str, requested_strategy: str, fell_back: bool, tokens_saved: int
) -> None:
    COMPACTIONS.labels(strategy, "fallback" if fell_back else "requested").inc()
    if fell_back:
        COMPACTION_FALLBACKS.labels(requested_strategy).inc()
    COMPACTION_TOKENS_SAVED.labels(strategy).inc(max(0, tokens_saved))


@_unless_muted
def record_grounding(grounding: ActionGrounding, *, unit: str | None, tenant: int) -> None:
    label = UNIT_LABEL(unit, tenant=tenant)
    for outcome in ("visible", "recallable", "neither"):
        NEXT_ACTION_IDENTIFIERS.labels(label, outcome).inc(getattr(grounding, outcome))
    for form, count in sorted(grounding.misses.items()):
        NEXT_ACTION_MISSES.labels(label, form).inc(count)
    if grounding.needed:
        NEXT_ACTION_CALLS.labels(label, str(grounding.is_all_visible).lower()).inc()


@_unless_muted
def record_hook(hook: HookResult) -> None:
    HOOK_CALLS.labels(hook.event, hook.outcome, hook.reason or "").inc()


@_unless_muted
def record_recall(*, mode: str, outcome: str, tokens: int, unit: str | None, tenant: int) -> None:
    unit_label = UNIT_LABEL(unit, tenant=tenant)
    RECALLS.labels(unit_label, mode, outcome).inc()
    if tokens:
        RECALL_TOKENS.labels(unit_label).inc(tokens)
