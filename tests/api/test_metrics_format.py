"""The /metrics exposition passes `promtool check metrics` (when promtool is installed) after
traffic on every endpoint family, names every series the dashboard reads, and caller-chosen
labels stay bounded."""

from __future__ import annotations

import shutil
import subprocess

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import LabelCap
from tests.builders import tool_call, tool_output, user_msg
from tests.unit.test_deploy import SERIES_SUFFIXES, dashboard_exprs, metric_names


def test_exposition_is_valid_prometheus_text(client: TestClient, session_id: str) -> None:
    client.post("/sessions", json={"session_id": session_id})
    client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("go"), tool_call("c1"), tool_output("c1", "done")]},
    )
    client.post("/assemble", json={"session_id": session_id, "unit": "u", "phase": "p"})
    client.post("/history/normalize", json={"items": [tool_call("c2")]})
    client.post("/compact", json={"session_id": session_id, "strategy": "clear_tool_results"})
    text = client.get("/metrics").text
    assert "contextd_assembly_duration_seconds_bucket" in text
    promtool = shutil.which("promtool")
    if promtool is not None:
        checked = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
        )
        assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_every_series_the_dashboard_reads_is_in_the_exposition(client: TestClient) -> None:
    """Read from the service's own /metrics, not the registry: a metric defined but never
    exported would pass a registry check and leave a panel empty."""
    exposed = {
        family.name + suffix
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for suffix in SERIES_SUFFIXES.get(family.type, ("",))
    }
    read = set().union(*(metric_names(expr) for expr in dashboard_exprs()))
    assert read
    assert read - exposed == set()


def test_label_cap_keeps_the_first_values_and_folds_the_rest() -> None:
    cap = LabelCap(per_tenant=2, overall=10)
    assert [cap(v, tenant=1) for v in ("a", "b", "c", "a", None, "")] == [
        "a",
        "b",
        "other",
        "a",
        "none",
        "none",
    ]


def test_label_cap_is_per_tenant_under_an_overall_ceiling() -> None:
    cap = LabelCap(per_tenant=2, overall=3)
    # One tenant's many names do not turn another tenant's into 'other'.
    assert [cap(v, tenant=1) for v in ("a", "b", "c")] == ["a", "b", "other"]
    assert [cap(v, tenant=2) for v in ("x", "a", "y")] == ["x", "a", "other"]
    assert cap("b", tenant=1) == "b"


def test_metrics_labels_are_bounded_whatever_callers_send(client: TestClient) -> None:
    before = len(client.get("/metrics").text)
    session = "labels-bounded"
    client.post("/sessions", json={"session_id": session})
    odd = [{"type": f"vendor_item_{n}", "payload": n} for n in range(300)]
    appended = client.post(f"/sessions/{session}/items", json={"items": odd, "unit": "u1"})
    assert appended.status_code == 201, appended.text
    text = client.get("/metrics").text
    assert "vendor_item_" not in text
    assert 'contextd_appended_items_total{type="other"} ' in text
    # 300 unknown types cost one series, not 300.
    assert len(text) - before < 2_000


def test_metrics_can_ask_for_a_bearer_token(postgres_url: str) -> None:
    from app.main import create_app
    from app.settings import Settings

    settings = Settings(database_url=postgres_url, metrics_token="scrape-secret")
    with TestClient(create_app(settings)) as service:
        refused = service.get("/metrics")
        wrong = service.get("/metrics", headers={"Authorization": "Bearer nope"})
        allowed = service.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
    assert (refused.status_code, wrong.status_code, allowed.status_code) == (401, 401, 200)
    assert refused.json()["error"]["code"] == "unauthorized"
    assert (refused.headers["www-authenticate"], wrong.headers["www-authenticate"]) == (
        'Bearer realm="contextd"',
        'Bearer realm="contextd", error="invalid_token"',
    )
    assert "contextd_http_requests_total" in allowed.text
