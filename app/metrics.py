"""Every Prometheus metric of the service, defined once.

Label values are bounded: routes are path templates, never raw paths; units and phases are
caller-chosen names and are documented as low-cardinality by contract.
"""

from __future__ import annotations

import threading

from prometheus_client import Counter, Histogram

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
    """Caps a caller-chosen label to its first `limit` distinct values; later ones read 'other'.

    Caller-chosen values (units, phases) would otherwise create unbounded series.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if not value:
            return "none"
        with self.lock:
            if value in self.seen:
                return value
            if len(self.seen) < self.limit:
                self.seen.add(value)
                return value
        return "other"


UNIT_LABEL = LabelCap(50)
PHASE_LABEL = LabelCap(50)
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
HOOK_CALLS = Counter(
    "contextd_hook_calls_total", "Lifecycle hook calls, by event and outcome.", ["event", "outcome"]
)
