"""Plans and facts are written lz4-compressed on a PostgreSQL built with lz4."""

from __future__ import annotations

import psycopg
from fastapi.testclient import TestClient

from tests.builders import long_text, tool_call, tool_output, user_msg
from tests.conftest import _admin_conninfo


def test_large_plans_and_facts_are_stored_lz4_compressed(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    # A small window and a large newest output: the plan stores the output as it cut it
    # (large), where every item shown as the log holds it is stored by reference (small).
    client.post(
        "/sessions", json={"session_id": session_id, "context_window": 16_000}
    ).raise_for_status()
    items = [user_msg(long_text(3_000)), tool_call("c1"), tool_output("c1", long_text(60_000))]
    client.post(f"/sessions/{session_id}/items", json={"items": items}).raise_for_status()
    made = client.post("/assemble", json={"session_id": session_id}).json()
    assert [item["form"] for item in made["items"]][-1] == "truncated"
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        methods = db.execute(
            "SELECT pg_column_compression(f.item), pg_column_compression(a.response)"
            " FROM facts f, assemblies a"
            " WHERE f.session_id = a.session_id AND a.external_id = %s"
            " AND length(f.item::text) > 4000",
            (made["assembly_id"],),
        ).fetchall()
    assert methods == [("lz4", "lz4"), ("lz4", "lz4")]
