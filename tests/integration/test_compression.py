"""Plans and facts are written lz4-compressed on a PostgreSQL built with lz4."""

from __future__ import annotations

import psycopg
from fastapi.testclient import TestClient

from tests.builders import long_text, user_msg
from tests.conftest import _admin_conninfo


def test_large_plans_and_facts_are_stored_lz4_compressed(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    items = [user_msg(long_text(3_000))]
    client.post(f"/sessions/{session_id}/items", json={"items": items}).raise_for_status()
    made = client.post("/assemble", json={"session_id": session_id}).json()
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        methods = db.execute(
            "SELECT pg_column_compression(f.item), pg_column_compression(a.response)"
            " FROM facts f, assemblies a"
            " WHERE f.session_id = a.session_id AND a.external_id = %s",
            (made["assembly_id"],),
        ).fetchall()
    assert methods == [("lz4", "lz4")]
