"""Every 401 carries one `WWW-Authenticate: Bearer` challenge (RFC 7235 section 3.1), with RFC
6750's error code where one applies: `invalid_token` for a token the service does not know,
`invalid_request` for a malformed header, none when no bearer token was sent (section 3.1: a
request without authentication information gets no error code). /metrics answers the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

REALM = 'Bearer realm="contextd"'
INVALID_TOKEN = 'Bearer realm="contextd", error="invalid_token"'
INVALID_REQUEST = 'Bearer realm="contextd", error="invalid_request"'
BASIC_ALPHA = "Basic YWxwaGE6a2V5LWFscGhh"  # alpha:key-alpha, in the scheme the service refuses
METRICS_REFUSAL = "/metrics needs 'Authorization: Bearer <CTX_METRICS_TOKEN>'"


@pytest.fixture(scope="module")
def service(postgres_url: str) -> Iterator[TestClient]:
    settings = Settings(
        database_url=postgres_url, api_keys=["alpha:key-alpha"], metrics_token="scrape-secret"
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _unauthorized(message: str) -> dict[str, Any]:
    return {"error": {"code": "unauthorized", "message": message, "details": None}}


def _answer(response: Any) -> tuple[int, list[str], str | None, Any]:
    """What a client sees of a refusal: status, every challenge, the body's type and the body."""
    return (
        response.status_code,
        response.headers.get_list("www-authenticate"),
        response.headers.get("content-type"),
        response.json(),
    )


CREDENTIALS = {
    "missing_key": (
        {},
        REALM,
        "missing API key: send 'Authorization: Bearer <key>'",
    ),
    "unknown_key": (
        {"Authorization": "Bearer key-nobody-has"},
        INVALID_TOKEN,
        "unknown API key",
    ),
    "basic_scheme": (
        {"Authorization": BASIC_ALPHA},
        REALM,
        "the Basic scheme is not accepted: send 'Bearer <key>'",
    ),
    "key_without_scheme": (
        {"Authorization": "key-alpha"},
        INVALID_REQUEST,
        "malformed Authorization header: no scheme; expected 'Bearer <key>'",
    ),
    "unknown_scheme": (
        {"Authorization": "sk-good-123 sk-good-123"},
        REALM,
        "this scheme is not accepted: send 'Bearer <key>'",
    ),
    "bearer_without_key": (
        {"Authorization": "Bearer "},
        INVALID_REQUEST,
        "malformed Authorization header: expected 'Bearer <key>'",
    ),
}


@pytest.mark.parametrize(
    ("headers", "challenge", "message"), CREDENTIALS.values(), ids=CREDENTIALS.keys()
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/sessions/anything", None),
        ("POST", "/sessions", {"session_id": "anything"}),
        ("POST", "/history/normalize", {"items": []}),
    ],
    ids=["read", "create", "stateless_normalize"],
)
def test_every_401_carries_one_bearer_challenge(
    service: TestClient,
    *,
    headers: dict[str, str],
    challenge: str,
    message: str,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    response = service.request(method, path, headers=headers, json=body)
    assert _answer(response) == (401, [challenge], "application/json", _unauthorized(message))


@pytest.mark.parametrize(
    "header", ["key-alpha", "sk-good-123", "sk-good-123 and-more", "Bearer", "  key-alpha  "]
)
def test_no_refusal_repeats_what_may_be_a_credential(service: TestClient, header: str) -> None:
    """A header's first word is named back only when it is a known scheme: anything else may be
    the key itself (sent without its scheme), and would land in the client's logs."""
    for path in ("/sessions/anything", "/metrics"):
        response = service.get(path, headers={"Authorization": header})
        assert response.status_code == 401
        secret = header.split()[0]
        assert secret == "Bearer" or secret not in response.text
        assert secret == "Bearer" or secret not in str(response.headers)


def test_a_known_key_gets_no_challenge(service: TestClient) -> None:
    response = service.get("/sessions/anything", headers={"Authorization": "Bearer key-alpha"})
    assert (response.status_code, response.headers.get("www-authenticate")) == (404, None)


METRICS_CREDENTIALS = {
    "missing_token": ({}, REALM),
    "wrong_token": ({"Authorization": "Bearer nope"}, INVALID_TOKEN),
    "an_api_key": ({"Authorization": "Bearer key-alpha"}, INVALID_TOKEN),
    "basic_scheme": ({"Authorization": "Basic c2NyYXBlLXNlY3JldA=="}, REALM),
    "token_without_scheme": ({"Authorization": "scrape-secret"}, INVALID_REQUEST),
}


@pytest.mark.parametrize(
    ("headers", "challenge"), METRICS_CREDENTIALS.values(), ids=METRICS_CREDENTIALS.keys()
)
def test_a_refused_metrics_scrape_carries_a_bearer_challenge(
    service: TestClient, headers: dict[str, str], challenge: str
) -> None:
    response = service.get("/metrics", headers=headers)
    assert _answer(response) == (
        401,
        [challenge],
        "application/json",
        _unauthorized(METRICS_REFUSAL),
    )


def test_an_allowed_metrics_scrape_gets_no_challenge(service: TestClient) -> None:
    response = service.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
    assert (response.status_code, response.headers.get("www-authenticate")) == (200, None)
