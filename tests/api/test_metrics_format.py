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
    cap = LabelCap(2)
    assert [cap(v) for v in ("a", "b", "c", "a", None, "")] == [
        "a",
        "b",
        "other",
        "a",
        "none",
        "none",
    ]
