"""OpenTelemetry traces: off unless the standard `OTEL_*` variables ask for them.

The libraries do the tracing; this module only says when and what to add:

- FastAPI's own telemetry makes each request's server span, continuing the caller's
  `traceparent`, and, asked to configure itself (`telemetry_config`), sets up the SDK with a
  batching OTLP/HTTP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its `_TRACES_` form)
  names a collector. `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_BSP_*` hold as
  the SDK reads them.
- `instrument` adds the database's spans (SQLAlchemy's instrumentation, on the service's
  engine; appends run on the event loop's own connections, outside it) and outbound calls'
  (httpx's: the `llm` summarizer and hooks, which carry the trace onward in their own
  `traceparent`), only when tracing is requested.
- `stage` names a step of a request (the assembly's load, plan, render and store; a
  compaction), `annotate` puts attributes on the current span, `exemplar` adds the trace id
  to a Prometheus exemplar.

Invariant: with tracing not requested nothing is exported, no instrumentation is installed and
`stage`, `annotate` and `exemplar` do no work beyond a flag test, so a call costs what it cost
without this module (`bench.assemble` measures it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fastapi.telemetry import TelemetryConfig
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
from opentelemetry.instrumentation.sqlalchemy.version import (
    __version__ as sqlalchemy_instrumentation_version,
)
from opentelemetry.semconv.metrics import MetricInstruments
from opentelemetry.trace import Span
from sqlalchemy.engine import Engine

__all__ = ["annotate", "exemplar", "instrument", "requested", "stage", "telemetry_config"]

_tracer = trace.get_tracer("contextd")
_SQLALCHEMY_INSTRUMENTATION = "opentelemetry.instrumentation.sqlalchemy"
_on = False
"""Whether this process traces: set by `instrument`."""


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask for traces: a collector named for them, the traces
    exporter not `none`, the SDK not disabled (FastAPI's configuration reads them alike)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def telemetry_config() -> TelemetryConfig:
    """FastAPI's telemetry settings: request spans only (the metrics are Prometheus's, and
    FastAPI's logs would export request bodies that fail validation), the exporter set up from
    the environment when it asks for one."""
    return {"auto_configure": requested(), "metrics": False, "logs": False}


def instrument(engine: Engine) -> None:
    """Spans for `engine`'s statements and for outbound HTTP calls, when tracing is requested."""
    global _on
    if not requested():
        return
    _on = True
    # The instrumentation's tracer on this engine alone: its `instrument()` would also patch
    # every `create_engine` (the asyncio one too, which needs greenlet) and it declares
    # SQLAlchemy below 2.1, whose engine events are unchanged in 2.1
    # (tests/e2e/test_tracing.py holds its spans to the statements).
    EngineTracer(  # type: ignore[no-untyped-call]
        trace.get_tracer(_SQLALCHEMY_INSTRUMENTATION, sqlalchemy_instrumentation_version),
        engine,
        metrics.get_meter(_SQLALCHEMY_INSTRUMENTATION).create_up_down_counter(
            MetricInstruments.DB_CLIENT_CONNECTIONS_USAGE, unit="connections"
        ),
    )
    if not HTTPXClientInstrumentor().is_instrumented_by_opentelemetry:
        HTTPXClientInstrumentor().instrument()


@contextmanager
def stage(name: str) -> Iterator[Span | None]:
    """A child span of the current one for one step of a request, `contextd.<name>`; None when
    not tracing."""
    if not _on:
        yield None
        return
    with _tracer.start_as_current_span(f"contextd.{name}") as span:
        yield span


def annotate(attributes: Callable[[], Mapping[str, Any]]) -> None:
    """Sets the attributes `attributes()` gives (those not None) on the current span, when
    tracing: they are not computed otherwise."""
    if _on:
        span = trace.get_current_span()
        if span.is_recording():
            given = attributes()
            span.set_attributes({key: value for key, value in given.items() if value is not None})


def exemplar(**labels: str) -> dict[str, str] | None:
    """`labels` for a Prometheus exemplar, with the current trace's id when tracing; None when
    that leaves none."""
    if _on:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            labels = {**labels, "trace_id": trace.format_trace_id(context.trace_id)}
    return labels or None
