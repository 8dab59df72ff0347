"""Tenant isolation, walked from the contract: every operation of openapi.yaml (and of the live
app, so a route not yet in the committed file is walked too) that names a resource by a path
parameter is called by tenant beta against tenant alpha's resources, and must answer exactly as
for a resource that does not exist (404), never with alpha's data and never by changing it.
Operations that take a resource id in their body (`/assemble`, `/compact`, ...) are walked too.
Without a key, every operation that declares a 401 answers 401."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.builders import tool_call, tool_output, user_msg

SPEC = Path(__file__).resolve().parents[2] / "openapi.yaml"
METHODS = ("get", "post", "put", "patch", "delete")
ALPHA = {"Authorization": "Bearer key-a"}
BETA = {"Authorization": "Bearer key-b"}
SECRET = f"alpha-secret-{uuid.uuid4().hex}"

# Minimal valid bodies, so that a 404 really is "not yours" rather than "bad body".
# Operations not listed get `{}` (plus any resource reference their schema names).
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/sessions/{session_id}/items"): {"items": [user_msg("beta was here")]},
    ("put", "/sessions/{session_id}/goal"): {"text": "beta goal"},
    ("put", "/sessions/{session_id}/world-state"): {"sections": {"env": "beta"}},
    ("post", "/sessions/{session_id}/usage"): {"input_tokens": 1, "output_tokens": 1},
    ("post", "/sessions/{session_id}/retractions"): {"seq": 1},
    ("post", "/sessions/{session_id}/end"): {},
    ("post", "/sessions/{session_id}/delegate"): {"goal": "beta sub-goal"},
    ("post", "/sessions/{session_id}/fork"): {},
    ("post", "/sessions/{session_id}/merge"): {"conclusion": user_msg("beta conclusion")},
    ("post", "/assemblies/{assembly_id}/replay"): {},
    ("put", "/manifests/{name}"): {"entries": [{"id": "r1", "content": "beta rule"}]},
    ("post", "/assemble"): {},
    ("post", "/compact"): {"strategy": "clear_tool_results", "params": {"keep_recent": 0}},
    ("post", "/history/normalize"): {},
}
# Body fields that reference a tenant's resource, by the resource they name, and the fields
# that must come with a reference to make the body valid.
BODY_REFERENCES = {"session_id": "session_id", "manifest": "name", "assembly_id": "assembly_id"}
WITH_REFERENCE: dict[tuple[str, str, str], dict[str, Any]] = {
    ("post", "/assemble", "manifest"): {"role": "planner"},
}
MANIFEST = {"entries": [{"id": "r1", "content": SECRET}], "roles": {"planner": {}}}
# Operations that legitimately create the caller's own resource under a caller-chosen key
# (resources are namespaced per tenant); checked separately below.
CREATES_OWN = {("post", "/sessions"), ("put", "/manifests/{name}")}
KNOWN_KINDS = {"session_id", "assembly_id", "name"}
FOUND_AS_CONFLICT = {("post", "/sessions/{session_id}/retractions")}


def _load_operations(live_spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    committed = yaml.safe_load(SPEC.read_text())
    operations: dict[tuple[str, str], dict[str, Any]] = {}
    for spec in (committed, live_spec):
        for path, item in spec["paths"].items():
            for method in METHODS:
                if method in item:
                    operations.setdefault((method, path), {**item[method], "_spec": spec})
    return operations


def _request_schema(operation: dict[str, Any]) -> dict[str, Any]:
    spec = operation["_spec"]
    schema: dict[str, Any] = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema", {})
    )
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _path_params(path: str) -> list[str]:
    return re.findall(r"{([^}]+)}", path)


def _references(method: str, path: str, operation: dict[str, Any]) -> list[str | None]:
    """How the operation names a resource: `None` for its path, else each body field in turn."""
    if (method, path) in CREATES_OWN:
        return []
    if _path_params(path):
        return [None]
    properties = _request_schema(operation).get("properties", {})
    return [field for field in BODY_REFERENCES if field in properties]


def _known(method: str, path: str, operation: dict[str, Any], kinds: list[str]) -> bool:
    """Whether this file knows a valid body and every resource the operation names. A new
    operation it does not know yet is still walked, with a looser expectation."""
    body_known = "requestBody" not in operation or (method, path) in BODIES
    return body_known and all(kind in KNOWN_KINDS for kind in kinds)


def _call(
    client: TestClient,
    method: str,
    path: str,
    operation: dict[str, Any],
    ids: dict[str, str],
    *,
    reference: str | None,
    headers: dict[str, str],
) -> Any:
    url = path
    for param in _path_params(path):
        url = url.replace(f"{{{param}}}", ids.get(param, "no-such-resource"))
    kwargs: dict[str, Any] = {"headers": headers}
    if "requestBody" in operation:
        body = dict(BODIES.get((method, path), {}))
        if reference is not None:
            body[reference] = ids.get(BODY_REFERENCES[reference], "no-such-resource")
            body.update(WITH_REFERENCE.get((method, path, reference), {}))
        kwargs["json"] = body
    return client.request(method.upper(), url, **kwargs)


@pytest.fixture(scope="module")
def service(postgres_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=postgres_url, api_keys=["alpha:key-a", "beta:key-b"])
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def operations(service: TestClient) -> dict[tuple[str, str], dict[str, Any]]:
    app = service.app
    assert isinstance(app, FastAPI)
    return _load_operations(app.openapi())


def _ok(response: Any, *expected: int) -> dict[str, Any]:
    assert response.status_code in expected, (response.request.url, response.text)
    body: dict[str, Any] = response.json() if response.content else {}
    return body


def _create_alpha_resources(
    service: TestClient, operations: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, list[str]]:
    """Alpha's resources of every kind the contract names, each carrying SECRET."""
    tag = uuid.uuid4().hex[:8]
    session_id = f"alpha-{tag}"
    _ok(
        service.post(
            "/sessions",
            json={"session_id": session_id, "model": SECRET[:50], "metadata": {"s": SECRET}},
            headers=ALPHA,
        ),
        201,
    )
    items = [user_msg(f"{SECRET} question"), tool_call("c1"), tool_output("c1", SECRET * 20)]
    _ok(service.post(f"/sessions/{session_id}/items", json={"items": items}, headers=ALPHA), 201)
    _ok(service.put(f"/sessions/{session_id}/goal", json={"text": SECRET}, headers=ALPHA), 200)
    _ok(
        service.put(
            f"/sessions/{session_id}/world-state",
            json={"sections": {"env": SECRET}},
            headers=ALPHA,
        ),
        200,
    )
    assembled = _ok(service.post("/assemble", json={"session_id": session_id}, headers=ALPHA), 201)
    ids: dict[str, list[str]] = {
        "session_id": [session_id],
        "assembly_id": [assembled["assembly_id"]],
    }
    if ("post", "/sessions/{session_id}/fork") in operations:
        child = f"alpha-fork-{tag}"
        _ok(
            service.post(f"/sessions/{session_id}/fork", json={"session_id": child}, headers=ALPHA),
            201,
        )
        ids["session_id"].append(child)  # children are walked too (merge, end, ...)
    if ("put", "/manifests/{name}") in operations:
        name = f"alpha-manifest-{tag}"
        # If the body shape changed, the walk still checks that beta gets 404 for the name.
        if service.put(f"/manifests/{name}", json=MANIFEST, headers=ALPHA).status_code == 200:
            # A second version, so that alpha's is at 2.
            _ok(service.put(f"/manifests/{name}", json=MANIFEST, headers=ALPHA), 200)
        ids["name"] = [name]
    return ids


@pytest.fixture(scope="module")
def alpha(
    service: TestClient, operations: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, list[str]]:
    return _create_alpha_resources(service, operations)


def _combinations(ids: dict[str, list[str]], kinds: list[str]) -> Iterator[dict[str, str]]:
    """One id assignment per alpha resource of each kind the operation names."""
    count = max([len(ids.get(kind, [""])) for kind in kinds] or [1])
    for n in range(count):
        yield {kind: values[min(n, len(values) - 1)] for kind, values in ids.items()}


def _kinds(path: str, reference: str | None) -> list[str]:
    return _path_params(path) if reference is None else [BODY_REFERENCES[reference]]


def _snapshot(service: TestClient, ids: dict[str, list[str]]) -> list[Any]:
    state: list[Any] = []
    for session_id in ids["session_id"]:
        state.append(service.get(f"/sessions/{session_id}", headers=ALPHA).json())
        state.append(service.get(f"/sessions/{session_id}/items", headers=ALPHA).json())
    for assembly_id in ids["assembly_id"]:
        state.append(service.get(f"/assemblies/{assembly_id}", headers=ALPHA).json())
    for name in ids.get("name", []):
        state.append(service.get(f"/manifests/{name}", headers=ALPHA).json())
    return state


Walk = tuple[str, str, "str | None"]


def _walked(operations: dict[tuple[str, str], dict[str, Any]]) -> list[Walk]:
    walks = [
        (method, path, reference)
        for (method, path), operation in operations.items()
        for reference in _references(method, path, operation)
    ]
    return sorted(walks, key=str)


def test_the_walk_covers_every_resource_operation(
    operations: dict[tuple[str, str], dict[str, Any]],
) -> None:
    walked = {(method, path) for method, path, _ in _walked(operations)}
    with_params = {key for key in operations if _path_params(key[1])}
    assert with_params - CREATES_OWN <= walked
    assert {("get", "/sessions/{session_id}"), ("post", "/assemble")} <= walked


def test_beta_cannot_reach_alpha_resources_on_any_operation(
    service: TestClient,
    operations: dict[tuple[str, str], dict[str, Any]],
    alpha: dict[str, list[str]],
) -> None:
    before = _snapshot(service, alpha)
    missing = {kind: f"missing-{uuid.uuid4().hex[:8]}" for kind in ("session_id", "name")}
    missing["assembly_id"] = "asm_" + uuid.uuid4().hex
    failures: list[str] = []
    for method, path, reference in _walked(operations):
        operation = operations[(method, path)]
        kinds = _kinds(path, reference)
        for ids in _combinations(alpha, kinds):
            answer = _call(service, method, path, operation, ids, reference=reference, headers=BETA)
            named = {kind: ids.get(kind) for kind in kinds}
            label = (
                f"{method.upper()} {path} {reference or ''} {named} -> "
                f"{answer.status_code} {answer.text[:300]}"
            )
            if SECRET in answer.text:
                failures.append(f"alpha's data leaked: {label}")
            if not _known(method, path, operation, kinds):
                if answer.status_code not in (401, 404, 422):
                    failures.append(f"an unknown operation let beta in: {label}")
                continue
            if answer.status_code != 404 or answer.json()["error"]["code"] != "not_found":
                failures.append(f"expected 404 not_found: {label}")
                continue
            # Indistinguishable from a resource that does not exist at all.
            absent = _call(
                service, method, path, operation, missing, reference=reference, headers=BETA
            )
            mine = answer.text
            for kind in kinds:
                mine = mine.replace(ids[kind], missing[kind])
            if (absent.status_code, absent.text) != (404, mine):
                failures.append(f"differs from a missing id: {label} vs {absent.text[:300]}")
    assert failures == []
    assert _snapshot(service, alpha) == before, "beta's requests changed alpha's resources"


def test_own_resources_under_alpha_names_stay_separate(
    service: TestClient,
    operations: dict[tuple[str, str], dict[str, Any]],
    alpha: dict[str, list[str]],
) -> None:
    """Beta may create its own session (or manifest) under a name alpha uses: it is a new,
    empty resource of beta's, and alpha's stays untouched. Runs after the walk (file order)."""
    before = _snapshot(service, alpha)
    session_id = alpha["session_id"][0]
    created = service.post("/sessions", json={"session_id": session_id}, headers=BETA)
    assert created.status_code == 201, created.text
    assert created.json()["last_seq"] == 0
    assert SECRET not in created.text
    assert service.get(f"/sessions/{session_id}/items", headers=BETA).json()["items"] == []
    if "name" in alpha:
        name = alpha["name"][0]
        put = service.put(
            f"/manifests/{name}", json=BODIES[("put", "/manifests/{name}")], headers=BETA
        )
        assert put.status_code == 200, put.text
        assert put.json()["version"] == 1  # not alpha's version + 1: no existence oracle
        assert SECRET not in service.get(f"/manifests/{name}", headers=BETA).text
    assert _snapshot(service, alpha) == before


def test_every_protected_operation_answers_401_without_a_valid_key(
    service: TestClient,
    operations: dict[tuple[str, str], dict[str, Any]],
    alpha: dict[str, list[str]],
) -> None:
    failures: list[str] = []
    # /metrics asks for its own token (CTX_METRICS_TOKEN, unset here), not a tenant's key.
    protected = [
        key
        for key, op in operations.items()
        if "401" in op.get("responses", {}) and key != ("get", "/metrics")
    ]
    assert ("get", "/sessions/{session_id}") in protected
    assert ("post", "/sessions") in protected
    for method, path in sorted(protected):
        operation = operations[(method, path)]
        references = _references(method, path, operation) or [None]
        ids = next(_combinations(alpha, _kinds(path, references[0])))
        for headers in ({}, {"Authorization": "Bearer not-a-key"}, {"Authorization": "key-a"}):
            answer = _call(
                service, method, path, operation, ids, reference=references[0], headers=headers
            )
            if answer.status_code != 401 or answer.json()["error"]["code"] != "unauthorized":
                failures.append(f"{method.upper()} {path} {headers}: {answer.status_code}")
            elif not answer.headers.get("www-authenticate", "").startswith("Bearer realm="):
                failures.append(f"{method.upper()} {path} {headers}: no Bearer challenge")
            if SECRET in answer.text:
                failures.append(f"{method.upper()} {path} leaked alpha's data without a key")
    assert failures == []


def test_the_walk_bodies_are_valid_for_the_owner(
    service: TestClient, operations: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """The control: the very requests beta got 404 for succeed for alpha (on fresh resources),
    so the 404s above come from tenancy, not from a bad body or a wrong id."""
    own = _create_alpha_resources(service, operations)
    failures: list[str] = []
    for method, path, reference in _walked(operations):
        operation = operations[(method, path)]
        kinds = _kinds(path, reference)
        if not _known(method, path, operation, kinds):
            continue
        statuses = []
        for ids in _combinations(own, kinds):
            answer = _call(
                service, method, path, operation, ids, reference=reference, headers=ALPHA
            )
            statuses.append((answer.status_code, answer.text[:200]))
        # The walk resets alpha's session before it retracts from it: a 409 (nothing active to
        # retract) shows the session was found, which is all the control asks.
        found = (200, 300) if (method, path) not in FOUND_AS_CONFLICT else (409, 410)
        if not any(found[0] <= status < found[1] for status, _ in statuses):
            failures.append(f"{method.upper()} {path} {reference or ''}: {statuses}")
    assert failures == []
