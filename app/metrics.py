"""Every Prometheus metric of the service, defined once.

Label values are bounded: routes are path templates, never raw paths; units and phases are
caller-chosen names and are documented as low-cardinality by contract.
"""

from __future__ import annotations

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
