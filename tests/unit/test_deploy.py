"""Deployment files: compose, Prometheus config and alerts, Grafana dashboard, Kubernetes manifests.

Every PromQL expression may only name metrics the service exports (read from the live
prometheus_client registry after importing app.metrics). promtool checks run when it is on PATH.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import app.metrics  # noqa: F401  (registers every metric of the service)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "contextd.json"
K8S = DEPLOY / "k8s"

# A metric name: a contextd_ identifier followed by a selector, a range, whitespace, `)` or the end.
METRIC_NAME = re.compile(r"\b(contextd_[A-Za-z0-9_]+)(?=[{\[)\s,]|$)")
SERIES_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
    "summary": ("", "_sum", "_count"),
    "info": ("_info",),
}


def exported_metrics() -> set[str]:
    names = {"up"}
    for family in REGISTRY.collect():
        for suffix in SERIES_SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


ALLOWED = exported_metrics()


def metric_names(expr: str) -> set[str]:
    return set(METRIC_NAME.findall(expr))


def assert_known_metrics(expr: str) -> None:
    names = metric_names(expr)
    assert names or re.search(r"\bup\b", expr), f"no metric found in {expr!r}"
    unknown = names - ALLOWED
    assert not unknown, f"{expr!r} names metrics the service does not export: {sorted(unknown)}"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if "expr" in t)
            walk(panel.get("panels", []))  # rows hold their collapsed panels

    walk(dashboard["panels"])
    return exprs


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]


def promtool(*args: str) -> None:
    result = subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


def test_metric_name_extraction() -> None:
    expr = (
        'sum(rate(contextd_a_total{x="y"}[5m])) / sum(rate(contextd_b_total[5m]))'
        " + histogram_quantile(0.9, contextd_c_bucket) + contextd_d_count"
    )
    assert metric_names(expr) == {
        "contextd_a_total",
        "contextd_b_total",
        "contextd_c_bucket",
        "contextd_d_count",
    }
    assert "contextd_http_requests_total" in ALLOWED
    assert "contextd_assembly_duration_seconds_bucket" in ALLOWED
    assert "contextd_http_requests" not in ALLOWED


def test_dashboard_names_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "contextd"
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        assert_known_metrics(expr)
    used = set().union(*(metric_names(e) for e in exprs))
    for required in (
        "contextd_context_tokens_total",
        "contextd_provider_tokens_total",
        "contextd_assembly_duration_seconds_bucket",
        "contextd_compactions_total",
        "contextd_compaction_fallbacks_total",
        "contextd_normalize_repairs_total",
        "contextd_http_requests_total",
        "contextd_assembly_tokens_count",
        "contextd_cache_predicted_tokens_total",
        "contextd_cache_actual_tokens_total",
        "contextd_calibration_observed_ratio_bucket",
        "contextd_calibration_overhead_tokens_bucket",
        "contextd_calibration_drift_ratio_bucket",
    ):
        assert required in used, f"no dashboard panel uses {required}"


def test_dashboard_has_a_cache_economics_row() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    (start,) = [n for n, p in enumerate(panels) if p["type"] == "row" and "Cache" in p["title"]]
    in_row = []
    for panel in panels[start + 1 :]:
        if panel["type"] == "row":
            break
        in_row.append(panel["title"])
    assert panels[start]["title"] == "Cache economics"
    assert in_row == [
        "Prefix reuse ratio (reused / assembled tokens)",
        "Fresh tokens per call",
        "Compactions per 100 calls",
        "Predicted vs actual cached tokens (tokens/s)",
    ]


def test_prometheus_config_scrapes_contextd() -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    assert {"global", "rule_files", "scrape_configs"} <= config.keys()
    for rule_file in config["rule_files"]:
        assert (PROMETHEUS_CONFIG.parent / rule_file).is_file(), rule_file
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    contextd = jobs["contextd"]
    assert contextd.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for sc in contextd["static_configs"] for t in sc["targets"]]
    assert "contextd:8000" in targets


def test_alert_rules_structure_and_metrics() -> None:
    rules = alert_rules()
    for rule in rules:
        assert {"alert", "expr", "for", "labels", "annotations"} <= rule.keys(), rule
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
        assert_known_metrics(rule["expr"])
    by_metric = " ".join(rule["expr"] for rule in rules)
    for metric in (
        'contextd_http_requests_total{status=~"5.."}',
        "contextd_http_request_duration_seconds_bucket",
        "contextd_compaction_fallbacks_total",
        "contextd_compactions_total",
        "contextd_database_unavailable_total",
        'up{job="contextd"}',
    ):
        assert metric in by_metric, f"no alert on {metric}"


def test_promtool_when_available(tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip(
            "promtool is not on PATH (the YAML checks above still ran); "
            "it comes with Prometheus, e.g. Debian's `prometheus` package: "
            "apt-get install prometheus"
        )
    promtool("check", "config", str(PROMETHEUS_CONFIG))
    promtool("check", "rules", str(ALERTS))
    promtool("test", "rules", str(ALERTS.with_name("alerts_test.yml")))
    # The dashboard's PromQL must parse too: check it as recording rules.
    records = [
        {"record": f"dashboard:expr_{i}", "expr": e.replace("$__rate_interval", "5m")}
        for i, e in enumerate(dashboard_exprs())
    ]
    rules = tmp_path / "dashboard_rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    promtool("check", "rules", str(rules))


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    docs: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(K8S.rglob("*.yaml")):
        docs.extend((path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


# Hand-written minimum per kind: dotted paths that must be present.
K8S_REQUIRED = {
    "Deployment": ["spec.replicas", "spec.selector.matchLabels", "spec.template.spec.containers"],
    "Service": ["spec.selector", "spec.ports"],
    "Job": ["spec.template.spec.containers", "spec.template.spec.restartPolicy"],
    "HorizontalPodAutoscaler": ["spec.scaleTargetRef.name", "spec.maxReplicas", "spec.metrics"],
    "ConfigMap": ["data"],
    "Secret": ["stringData"],
}
K8S_API_VERSIONS = {
    "Deployment": "apps/v1",
    "Service": "v1",
    "Job": "batch/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "ConfigMap": "v1",
    "Secret": "v1",
}


def dig(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for key in dotted.split("."):
        assert isinstance(value, dict), f"{dotted}: {key} is not under a mapping"
        assert key in value, f"missing {dotted}"
        value = value[key]
    return value


def by_kind() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for _, doc in k8s_documents()}


def test_k8s_manifests_parse_with_required_fields() -> None:
    docs = k8s_documents()
    assert docs
    for path, doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= doc.keys(), path
        assert doc["metadata"]["name"], path
        kind = doc["kind"]
        assert doc["apiVersion"] == K8S_API_VERSIONS[kind], path
        for field in K8S_REQUIRED[kind]:
            assert dig(doc, field), f"{path}: empty {field}"
    assert K8S_API_VERSIONS.keys() <= {doc["kind"] for _, doc in docs}


def test_k8s_deployment() -> None:
    kinds = by_kind()
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    assert (
        pod["metadata"]["labels"].items() >= deployment["spec"]["selector"]["matchLabels"].items()
    )
    assert kinds["Service"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["spec"]["containers"]
    serve = ["contextd", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
    assert container["command"] == serve
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"requests", "limits"} <= container["resources"].keys()
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {next(iter(source)) for source in container["envFrom"]} == {"configMapRef", "secretRef"}
    secret = kinds["Secret"]
    assert {"CTX_DATABASE_URL", "CTX_API_KEYS"} <= secret["stringData"].keys()
    assert all("CHANGE-ME" in value for value in secret["stringData"].values())
    assert "CTX_DATABASE_URL" not in kinds["ConfigMap"]["data"]
    assert all(isinstance(value, str) for value in kinds["ConfigMap"]["data"].values())
    hpa = kinds["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    (migrate,) = kinds["Job"]["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["contextd", "migrate"]


def test_docker_compose_services() -> None:
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]
    assert {"postgres", "migrate", "contextd", "prometheus", "grafana"} <= services.keys()
    assert "healthcheck" in services["postgres"]
    depends = services["contextd"]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert "CTX_API_KEYS" in services["contextd"]["environment"]
    for service in ("prometheus", "grafana"):
        for volume in services[service]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{service} mounts missing {source}"


@pytest.mark.parametrize(
    "path",
    [
        DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml",
        DEPLOY / "grafana" / "provisioning" / "dashboards" / "contextd.yml",
    ],
    ids=["datasource", "dashboard-provider"],
)
def test_grafana_provisioning(path: Path) -> None:
    config = load_yaml(path)
    assert config["apiVersion"] == 1
    if "datasources" in config:
        (source,) = config["datasources"]
        assert source["type"] == "prometheus"
        assert source["url"] == "http://prometheus:9090"
        panels = json.loads(DASHBOARD.read_text())["panels"]
        assert {panel["datasource"]["uid"] for panel in panels} == {source["uid"]}
    else:
        (provider,) = config["providers"]
        assert provider["options"]["path"] == "/etc/grafana/dashboards"
