"""No error body carries a stack trace, a SQL fragment or a driver name, whatever went wrong."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.builders import user_msg

LEAKS = re.compile(
    r"Traceback|File \"|SELECT |INSERT |UPDATE |DELETE |sqlalchemy|psycopg|sqlite3|\.py\b",
    re.IGNORECASE,
)


def test_error_bodies_never_leak_internals(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, max_body_bytes=5000, api_keys=["t:key"])
    auth = {"Authorization": "Bearer key"}
    with TestClient(create_app(settings)) as service:
        service.post("/sessions", json={"session_id": session_id}, headers=auth)
        service.post(f"/sessions/{session_id}/items", json={"items": [user_msg("a")]}, headers=auth)
        responses = [
            service.get("/sessions/x"),
            service.get("/sessions/x", headers={"Authorization": "Bearer nope"}),
            service.get("/sessions/missing", headers=auth),
            service.post(
                "/sessions", content=b"{", headers={**auth, "content-type": "application/json"}
            ),
            service.post("/sessions", json={"session_id": "bad id!"}, headers=auth),
            service.post(
                "/sessions", json={"session_id": session_id, "model": "other"}, headers=auth
            ),
            service.post(
                f"/sessions/{session_id}/items",
                json={"items": [user_msg("b")], "expected_last_seq": 0},
                headers=auth,
            ),
            service.post(
                f"/sessions/{session_id}/items",
                json={"items": [user_msg("x" * 6000)]},
                headers=auth,
            ),
            service.delete(f"/sessions/{session_id}", headers=auth),
            service.post(
                "/compact", json={"session_id": session_id, "strategy": "x"}, headers=auth
            ),
        ]
    unreachable = Settings(
        database_url="postgresql+psycopg://postgres@127.0.0.1:1/x", db_timeout_seconds=1
    )
    with TestClient(create_app(unreachable)) as down:
        responses.append(down.get("/sessions/x"))
    assert [r.status_code for r in responses] == [
        401,
        401,
        404,
        400,
        422,
        409,
        409,
        413,
        405,
        422,
        503,
    ]
    for response in responses:
        body = response.json()
        assert set(body) == {"error"}
        assert LEAKS.search(response.text) is None, response.text


def test_options_and_405_name_every_method_of_the_path(client: TestClient) -> None:
    options = client.options("/sessions/any/items")
    wrong = client.delete("/sessions/any/items")
    assert (options.status_code, options.headers["allow"], options.content) == (
        204,
        "GET, OPTIONS, POST",
        b"",
    )
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET, OPTIONS, POST")
    assert wrong.json()["error"]["code"] == "method_not_allowed"


def test_a_body_without_a_content_type_is_read_as_json(client: TestClient) -> None:
    # What `curl -d` and many clients send: no content type, or form encoding by default.
    bare = client.post("/sessions", content=b'{"session_id": "no-content-type"}', headers={})
    declared_text = client.post(
        "/sessions", content=b'{"session_id": "text-plain"}', headers={"content-type": "text/plain"}
    )
    charset = client.post(
        "/sessions",
        content=b'{"session_id": "with-charset"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert (bare.status_code, charset.status_code) == (201, 201)
    assert declared_text.status_code == 415
    assert declared_text.json()["error"] == {
        "code": "unsupported_media_type",
        "message": "the body is declared 'text/plain'; send it as application/json",
        "details": None,
    }
    assert client.get("/sessions/text-plain").status_code == 404
