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
from typing import Any, get_args

import pytest
import yaml
from prometheus_client import REGISTRY

import app.metrics  # noqa: F401  (registers every metric of the service)
from app.domain.compaction import Strategy
from app.hooks import HookOutcome

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
KUBERNETES_SCRAPE = DEPLOY / "prometheus" / "kubernetes-scrape.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERT_TESTS = DEPLOY / "prometheus" / "alerts_test.yml"
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

# The alerts and the dashboard select contextd's targets by the pod label app.kubernetes.io/name,
# which every scrape config copies onto them under the name service discovery gives it (each
# character not allowed in a label name becomes `_`), not by job.
POD_NAME_LABEL = "app.kubernetes.io/name"
TARGET_LABEL = (re.sub(r"[^A-Za-z0-9_]", "_", POD_NAME_LABEL), "contextd")
TARGET_UP = f'up{{{TARGET_LABEL[0]}="{TARGET_LABEL[1]}"}}'


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


# A label matcher in a series or selector: name, then =, !=, =~ or !~, then the quoted value.
LABEL_MATCHER = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')


def alert_test_labels(name: str) -> set[str]:
    """Every value the alert tests give label `name`: in input series and expected alerts."""
    values: set[str] = set()
    for case in load_yaml(ALERT_TESTS)["tests"]:
        for series in case.get("input_series", []):
            values.update(
                v for label, v in LABEL_MATCHER.findall(series["series"]) if label == name
            )
        for check in case.get("alert_rule_test", []):
            for alert in check.get("exp_alerts") or []:
                if name in alert.get("exp_labels", {}):
                    values.add(str(alert["exp_labels"][name]))
    return values


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
        "contextd_plan_store_failures_total",
        "contextd_hook_calls_total",
        "contextd_cache_outcomes_total",
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
        "Provider cache outcomes by class (reports/min)",
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
    label, value = TARGET_LABEL
    assert all(sc["labels"][label] == value for sc in contextd["static_configs"])


def test_kubernetes_scrape_keeps_annotated_pods_and_the_target_label() -> None:
    """The in-cluster job follows the pod's prometheus.io annotations and copies the pod label
    the alerts select on. (Not given to `promtool check config`: builds of Prometheus without
    Kubernetes discovery refuse the file.)"""
    (job,) = load_yaml(KUBERNETES_SCRAPE)["scrape_configs"]
    assert [sd["role"] for sd in job["kubernetes_sd_configs"]] == ["pod"]
    relabel = {
        rule.get("target_label", rule.get("action")): rule for rule in job["relabel_configs"]
    }
    keep = relabel["keep"]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    assert keep["regex"] == "true"
    path = relabel["__metrics_path__"]["source_labels"]
    assert path == ["__meta_kubernetes_pod_annotation_prometheus_io_path"]
    assert relabel["__address__"]["source_labels"][1:] == [
        "__meta_kubernetes_pod_annotation_prometheus_io_port"
    ]
    label, _ = TARGET_LABEL
    assert relabel[label]["source_labels"] == [f"__meta_kubernetes_pod_label_{label}"]
    assert relabel[label].get("action", "replace") == "replace"
    pod = by_kind()["Deployment"]["spec"]["template"]["metadata"]
    (container,) = by_kind()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert pod["labels"][POD_NAME_LABEL] == TARGET_LABEL[1]
    assert pod["annotations"]["prometheus.io/scrape"] == "true"
    assert pod["annotations"]["prometheus.io/path"] == "/metrics"
    assert [int(pod["annotations"]["prometheus.io/port"])] == [
        port["containerPort"] for port in container["ports"]
    ]


def test_alert_rules_structure_and_metrics() -> None:
    rules = alert_rules()
    for rule in rules:
        assert {"alert", "expr", "for", "labels", "annotations"} <= rule.keys(), rule
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]
        assert rule["annotations"]["runbook"], f"{rule['alert']}: no runbook (what to check)"
        assert_known_metrics(rule["expr"])
    by_metric = " ".join(rule["expr"] for rule in rules)
    for metric in (
        'contextd_http_requests_total{status=~"5.."}',
        "contextd_http_request_duration_seconds_bucket",
        "contextd_compaction_fallbacks_total",
        "contextd_compactions_total",
        "contextd_database_unavailable_total",
        "contextd_plan_store_failures_total",
        'contextd_hook_calls_total{outcome=~"failed_open|failed_closed"}',
        TARGET_UP,
        f"absent({TARGET_UP} == 1)",
    ):
        assert metric in by_metric, f"no alert on {metric}"


def test_no_alert_or_panel_selects_on_the_job_name() -> None:
    """The job label is the scrape config's to choose (the pods' annotations say nothing about
    it): an `up{job="contextd"}` stays silent under any other name."""
    for expr in [rule["expr"] for rule in alert_rules()] + dashboard_exprs():
        assert "job" not in dict(LABEL_MATCHER.findall(expr)), expr
    assert TARGET_UP in dashboard_exprs()


def test_every_alert_has_a_test_that_fires_it_and_one_that_does_not() -> None:
    checks = [
        check
        for case in load_yaml(ALERT_TESTS)["tests"]
        for check in case.get("alert_rule_test", [])
    ]
    for rule in alert_rules():
        outcomes = {bool(c.get("exp_alerts")) for c in checks if c["alertname"] == rule["alert"]}
        assert outcomes == {True, False}, f"{rule['alert']}: fires in a test? {outcomes or 'none'}"


def test_alert_tests_use_the_real_strategy_names() -> None:
    """An alert test on a strategy the service never emits proves nothing about production."""
    used, real = alert_test_labels("strategy"), set(get_args(Strategy))
    assert used, "no alert test exercises a strategy label"
    assert used <= real, f"not strategies of the service: {sorted(used - real)}"


def selector_values(text: str, *, metric: str, label: str) -> set[str]:
    """The values `text` matches `label` of `metric` against, a regex's alternatives each."""
    return {
        alternative
        for selector in re.findall(rf"\b{metric}\{{([^}}]*)\}}", text)
        for name, value in LABEL_MATCHER.findall(selector)
        if name == label
        for alternative in value.split("|")
    }


def test_hook_outcomes_in_rules_panels_and_alert_tests_are_real() -> None:
    texts = [rule["expr"] for rule in alert_rules()] + dashboard_exprs()
    texts += [
        series["series"]
        for case in load_yaml(ALERT_TESTS)["tests"]
        for series in case.get("input_series", [])
    ]
    used = set().union(
        *(selector_values(t, metric="contextd_hook_calls_total", label="outcome") for t in texts)
    )
    assert {"failed_open", "failed_closed", "not_configured"} <= used
    assert used <= set(get_args(HookOutcome)), sorted(used - set(get_args(HookOutcome)))


def test_fallback_panel_shows_what_the_alert_measures() -> None:
    (rule,) = [r for r in alert_rules() if r["alert"] == "ContextdCompactionFallbacks"]
    alerted = re.sub(r"\s+", "", rule["expr"]).removesuffix(">0.1")
    shown = [
        re.sub(r"\s+", "", expr).replace("$__rate_interval", "15m")
        for expr in dashboard_exprs()
        if "contextd_compaction_fallbacks_total" in expr
    ]
    assert alerted in shown


def test_promtool_when_available(tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip(
            "promtool is not on PATH (the YAML checks above still ran); "
            "it comes with Prometheus, e.g. Debian's `prometheus` package: "
            "apt-get install prometheus"
        )
    promtool("check", "config", str(PROMETHEUS_CONFIG))
    promtool("check", "rules", str(ALERTS))
    promtool("test", "rules", str(ALERT_TESTS))
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
    "PodDisruptionBudget": ["spec.selector.matchLabels"],
    "NetworkPolicy": ["spec.podSelector.matchLabels", "spec.policyTypes"],
}
K8S_API_VERSIONS = {
    "Deployment": "apps/v1",
    "Service": "v1",
    "Job": "batch/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "ConfigMap": "v1",
    "Secret": "v1",
    "PodDisruptionBudget": "policy/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
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
    # One worker per container: exemplars are per process (lost when workers' metrics merge).
    serve = ["contextd", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "1"]
    assert container["command"] == serve
    (cmd,) = re.findall(r"^CMD (.+)$", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE)
    assert json.loads(cmd) == serve
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
    assert hpa["spec"]["minReplicas"] == deployment["spec"]["replicas"]
    (migrate,) = kinds["Job"]["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["contextd", "migrate"]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_k8s_disruption_budget_keeps_a_pod_serving() -> None:
    kinds = by_kind()
    deployment, pdb = kinds["Deployment"], kinds["PodDisruptionBudget"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    migrate_labels = kinds["Job"]["spec"]["template"]["metadata"]["labels"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selects(selector, pod_labels)
    assert not selects(selector, migrate_labels)
    # maxUnavailable, not minAvailable: right at any replica count the HPA chooses.
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["maxUnavailable"] == 1
    least = kinds["HorizontalPodAutoscaler"]["spec"]["minReplicas"]
    assert least - pdb["spec"]["maxUnavailable"] >= 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_k8s_network_policy_admits_clients_and_prometheus_and_reaches_dns_and_postgres() -> None:
    kinds = by_kind()
    deployment, policy = kinds["Deployment"], kinds["NetworkPolicy"]
    pod = deployment["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selects(selector, pod["metadata"]["labels"])
    assert not selects(selector, kinds["Job"]["spec"]["template"]["metadata"]["labels"])
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    (container,) = pod["spec"]["containers"]
    container_ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    (service_port,) = kinds["Service"]["spec"]["ports"]
    assert container_ports[service_port["targetPort"]] == int(
        pod["metadata"]["annotations"]["prometheus.io/port"]
    )

    port = container_ports[service_port["targetPort"]]
    # Clients in the namespace and Prometheus's namespace, on the service's port only.
    prometheus = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"podSelector": {}}, {"namespaceSelector": prometheus}],
            "ports": [{"protocol": "TCP", "port": port}],
        }
    ]
    # DNS and PostgreSQL only, each rule naming its ports: nothing opens all egress, so the
    # hooks' destinations need a rule of their own.
    (database_port,) = re.findall(
        r"@[^/:]+:(\d+)/", kinds["Secret"]["stringData"]["CTX_DATABASE_URL"]
    )
    kube_system = {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    assert policy["spec"]["egress"] == [
        {
            "to": [
                {
                    "namespaceSelector": kube_system,
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
        {"ports": [{"protocol": "TCP", "port": int(database_port)}]},
    ]


def test_connection_budget_comment_matches_the_manifests() -> None:
    """configmap.yaml states the database connections at the HPA's maximum; it went stale once
    already (it still counted two workers a pod)."""
    kinds = by_kind()
    text = (K8S / "configmap.yaml").read_text()
    (stated,) = re.findall(r"(\d+) replicas \(HPA max\) x 2 x (\d+) = (\d+)", text)
    replicas, pool, total = map(int, stated)
    assert replicas == kinds["HorizontalPodAutoscaler"]["spec"]["maxReplicas"]
    assert pool == int(kinds["ConfigMap"]["data"]["CTX_DB_POOL_SIZE"])
    assert total == replicas * 2 * pool


def test_docker_compose_services() -> None:
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]
    assert {"postgres", "migrate", "contextd", "prometheus", "grafana"} <= services.keys()
    assert "healthcheck" in services["postgres"]
    depends = services["contextd"]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert "CTX_API_KEYS" in services["contextd"]["environment"]
    for service, definition in services.items():
        for volume in definition.get("volumes", ()):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{service} mounts missing {source}"
    # The standby runs only under its profile; everything else runs without one.
    profiled = {name for name, definition in services.items() if "profiles" in definition}
    assert profiled == {"standby-setup", "postgres-standby"}
    assert all(services[name]["profiles"] == ["standby"] for name in profiled)
    setup = services["postgres-standby"]["depends_on"]["standby-setup"]
    assert setup["condition"] == "service_completed_successfully"
    # Both the migration and the service take the database URL given (both hosts, with the
    # standby), the single primary otherwise.
    assert (
        services["migrate"]["environment"]["CTX_DATABASE_URL"]
        == services["contextd"]["environment"]["CTX_DATABASE_URL"]
    )


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
