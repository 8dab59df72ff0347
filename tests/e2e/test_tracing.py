"""OpenTelemetry traces from a real server process, received by a loopback OTLP/HTTP collector
(protobuf, parsed with OpenTelemetry's own message types).

With `OTEL_EXPORTER_OTLP_ENDPOINT` set, an `/assemble` sent with a `traceparent` joins that
trace: its server span is the caller's child, and under it come the assembly's stages (load,
plan, render, store) and their database statements, the assembly's span carrying the session,
tokens offered and selected, the reused prefix and the advice. A `/compact` with the `llm`
summarizer carries the trace on to the summarizer. The Python client, called inside an active
span, sends `traceparent`. Prometheus exemplars name the trace. Without the variables, nothing
is traced or exported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider

from contextd_client import ContextdClient
from tests.conftest import TRAJECTORIES, load_trajectory
from tests.e2e.servers import Server, running

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
COMPACT_TRACE = "0af7651916cd43dd8448eb211c80319c"
STAGES = ["contextd.assemble.load", "contextd.assemble.plan", "contextd.assemble.render"]


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    return getattr(value, value.WhichOneof("value") or "string_value")


@dataclass
class Loopback:
    """A loopback HTTP endpoint: OTLP/HTTP traces on `/v1/traces` (their spans kept), and an
    OpenAI-compatible `/chat/completions` that answers a summary (its requests' headers kept)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    summarizer_headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, path: str, headers: dict[str, str], body: bytes) -> bytes:
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            spans = [
                ReceivedSpan(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    name=span.name,
                    kind=span.kind,
                    attributes={a.key: _value(a.value) for a in span.attributes},
                )
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
            with self.lock:
                self.spans.extend(spans)
            return b""
        with self.lock:
            self.summarizer_headers.append(headers)
        answer = {"choices": [{"message": {"content": "The agent fixed the failing test."}}]}
        return orjson.dumps(answer)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def wait_for(self, trace_id: str, *names: str) -> list[ReceivedSpan]:
        """The trace's spans once every one of `names` has arrived (the exporter sends spans
        in batches, as they end: a request's own span last)."""
        for _ in range(600):
            spans = self.trace(trace_id)
            if set(names) <= {span.name for span in spans}:
                return spans
            time.sleep(0.05)
        raise AssertionError(f"{names} never arrived: {sorted(s.name for s in spans)}")


@pytest.fixture
def loopback() -> Iterator[tuple[str, Loopback]]:
    received = Loopback()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            answer = received.take(self.path, dict(self.headers), body)
            self.send_response(200)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _session(server: Server, session_id: str) -> None:
    items = load_trajectory(TRAJECTORIES[4])
    httpx.post(f"{server.base}/sessions", json={"session_id": session_id}).raise_for_status()
    httpx.put(
        f"{server.base}/sessions/{session_id}/goal", json={"text": "Fix the failing test."}
    ).raise_for_status()
    httpx.post(
        f"{server.base}/sessions/{session_id}/items", json={"items": items}
    ).raise_for_status()


def _ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> list[str]:
    by_id = {each.span_id: each for each in spans}
    names = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        names.append(span.name)
    return names


def _traceparent(trace_id: str, span_id: str) -> dict[str, str]:
    return {"traceparent": f"00-{trace_id}-{span_id}-01"}


def test_an_assembly_joins_the_callers_trace_with_its_stages_and_database_work(
    postgres_url: str, loopback: tuple[str, Loopback]
) -> None:
    base, received = loopback
    with running(
        postgres_url,
        OTEL_EXPORTER_OTLP_ENDPOINT=base,
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_SERVICE_NAME="contextd-under-test",
        CTX_SUMMARIZER_URL=f"{base}/v1",
    ) as server:
        _session(server, "traced")
        answer = httpx.post(
            f"{server.base}/assemble",
            json={"session_id": "traced"},
            headers=_traceparent(CALLER_TRACE, CALLER_SPAN),
        )
        assert answer.status_code == 201, answer.text
        spans = received.wait_for(CALLER_TRACE, "POST /assemble", "contextd.assemble", *STAGES)
        compacted = httpx.post(
            f"{server.base}/compact",
            json={"session_id": "traced", "strategy": "summary", "params": {"summarizer": "llm"}},
            headers=_traceparent(COMPACT_TRACE, CALLER_SPAN),
        )
        assert compacted.status_code == 201, compacted.text
        compaction = received.wait_for(COMPACT_TRACE, "POST /compact", "contextd.compact", "POST")
        scraped = httpx.get(
            f"{server.base}/metrics",
            headers={"accept": "application/openmetrics-text; version=1.0.0"},
        ).text
        client_tracer = TracerProvider().get_tracer("the agent's runtime")
        with (
            client_tracer.start_as_current_span("agent step") as step,
            ContextdClient(server.base) as client,
        ):
            client.assemble(session_id="traced")
        runtime = step.get_span_context()
        from_client = received.wait_for(
            trace.format_trace_id(runtime.trace_id), "POST /assemble", *STAGES
        )

    # The request's span continues the caller's; the stages and the statements are under it.
    (request,) = [span for span in spans if span.kind == 2]  # SERVER
    assert (request.parent_id, request.name) == (CALLER_SPAN, "POST /assemble")
    (assembly,) = [span for span in spans if span.name == "contextd.assemble"]
    for stage in STAGES:
        (step_span,) = [span for span in spans if span.name == stage]
        assert "contextd.assemble" in _ancestors(step_span, spans)
        assert "POST /assemble" in _ancestors(step_span, spans)
    statements = [span for span in spans if span.attributes.get("db.system") == "postgresql"]
    assert any("contextd.assemble.load" in _ancestors(span, spans) for span in statements)
    body = answer.json()
    assert assembly.attributes == {
        "gen_ai.conversation.id": "traced",
        "contextd.output_format": "responses",
        "contextd.tokens.offered": sum(entry["tokens"] for entry in body["plan"]),
        "contextd.tokens.selected": body["total_tokens"],
        "contextd.cache.reused_prefix_tokens": body["cache"]["reused_prefix_tokens"],
        "contextd.advice.should_compact": body["advice"]["should_compact"],
    }
    # The plan stored after the answer is in the same trace.
    received.wait_for(CALLER_TRACE, "contextd.assemble.store")

    # The compaction's span, and the summarizer called as its child with the trace carried on.
    (compact,) = [span for span in compaction if span.name == "contextd.compact"]
    result = compacted.json()
    assert compact.attributes == {
        "gen_ai.conversation.id": "traced",
        "contextd.compaction.requested_strategy": "summary",
        "contextd.compaction.strategy": result["strategy"],
        "contextd.compaction.applied": True,
        "contextd.tokens.before": result["tokens_before"],
        "contextd.tokens.after": result["tokens_after"],
    }
    (outbound,) = [span for span in compaction if span.name == "POST"]  # httpx's CLIENT span
    assert "contextd.compact" in _ancestors(outbound, compaction)
    (called,) = received.summarizer_headers
    assert called["traceparent"] == f"00-{COMPACT_TRACE}-{outbound.span_id}-01"

    # The Python client inside the runtime's span: the service's spans are that span's children.
    (request,) = [span for span in from_client if span.kind == 2]
    assert request.parent_id == trace.format_span_id(runtime.span_id)

    # The latencies' exemplars name the trace (OpenMetrics).
    assert f'trace_id="{CALLER_TRACE}"' in scraped


def test_without_the_variables_nothing_is_traced(postgres_url: str) -> None:
    with running(postgres_url) as server:
        _session(server, "untraced")
        answer = httpx.post(
            f"{server.base}/assemble",
            json={"session_id": "untraced"},
            headers=_traceparent(CALLER_TRACE, CALLER_SPAN),
        )
        assert answer.status_code == 201
        scraped = httpx.get(
            f"{server.base}/metrics",
            headers={"accept": "application/openmetrics-text; version=1.0.0"},
        ).text
    assert "trace_id" not in scraped
    assert 'assembly_id="' in scraped  # the exemplars are still there, without a trace
