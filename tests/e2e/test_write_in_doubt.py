"""A write whose answer the database never sent is in doubt, and the 503 says so: the append
was applied, the answer lost (a TCP proxy holds back everything after the append's statement
went through), and the 503 says the write may have been applied and that a retry with the same
idempotency key is safe; the retry returns the write, once. A write that never reached the
database says that nothing was written."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import make_url

from app.main import create_app
from app.settings import Settings
from tests.builders import user_msg
from tests.e2e.servers import TcpProxy, with_port


def test_an_append_whose_answer_is_lost_says_it_may_have_been_applied(
    postgres_url: str, session_id: str
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    settings = Settings(database_url=with_port(postgres_url, proxy.port), db_timeout_seconds=1)
    body: dict[str, Any] = {"items": [user_msg("deploy the fix")], "idempotency_key": "k-1"}
    try:
        with TestClient(create_app(settings)) as client:
            created = client.post("/sessions", json={"session_id": session_id})
            assert created.status_code == 201, created.text
            proxy.stall_after(b"INSERT INTO facts")
            lost = client.post(f"/sessions/{session_id}/items", json=body)
            proxy.resume()
            assert lost.status_code == 503, lost.text
            assert lost.headers["retry-after"] == "5"
            error = lost.json()["error"]
            assert (error["code"], error["details"]) == (
                "database_unavailable",
                {"write_in_doubt": True},
            )
            assert "may have been applied" in error["message"]
            assert "idempotency_key" in error["message"]
            again = client.post(f"/sessions/{session_id}/items", json=body)
            assert again.status_code in (200, 201), again.text
            assert again.json()["last_seq"] == 1
            listed = client.get(f"/sessions/{session_id}/items").json()["items"]
            assert [entry["item"] for entry in listed] == [user_msg("deploy the fix")]
    finally:
        proxy.stop()


def test_a_write_that_reached_no_database_says_nothing_was_written() -> None:
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/none"
    with TestClient(create_app(Settings(database_url=unreachable, db_timeout_seconds=1))) as client:
        refused = client.post("/sessions", json={"session_id": "s"})
        read = client.get("/sessions/s")
    assert refused.status_code == 503
    assert refused.json()["error"] == {
        "code": "database_unavailable",
        "message": "the database is unavailable and nothing was written; retry later",
        "details": {"write_in_doubt": False},
    }
    assert read.status_code == 503
    assert read.json()["error"]["details"] is None
