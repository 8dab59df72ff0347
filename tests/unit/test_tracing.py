"""When the standard `OTEL_*` variables ask for traces (`app.tracing.requested`), and that an
application made without them traces nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.trace import ProxyTracerProvider

from app import tracing
from app.main import create_app
from app.settings import Settings

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("environ", "traced"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "contextd"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "false"}, True),
    ],
)
def test_traces_are_requested_by_a_collector_endpoint_unless_turned_off(
    environ: dict[str, str], traced: bool
) -> None:
    assert tracing.requested(environ) is traced


def test_an_application_made_without_the_variables_traces_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with TestClient(create_app(Settings(database_url="sqlite://"))) as client:
        traced = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        assert client.get("/healthz", headers=traced).status_code == 200
        with tracing.stage("assemble") as span:
            assert span is None
        assert tracing.exemplar(assembly_id="asm_1") == {"assembly_id": "asm_1"}
    # No SDK was set up: the global provider is still the API's placeholder.
    assert isinstance(trace.get_tracer_provider(), ProxyTracerProvider)
