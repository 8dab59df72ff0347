"""A stored plan keeps what cannot be derived: the plan entries of the history items an
assembly shows, and the recall tool, are derived again when it is read, byte for byte."""

from __future__ import annotations

import json

import psycopg
from fastapi.testclient import TestClient

from app.domain.json_delta import patched
from tests.builders import tool_call, tool_output, user_msg
from tests.conftest import _admin_conninfo


def test_a_plan_is_stored_without_what_its_items_and_format_say(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    items = [user_msg("list the files"), tool_call("c1", "sh", "ls"), tool_output("c1", "a.py")]
    client.post(f"/sessions/{session_id}/items", json={"items": items}).raise_for_status()
    for output_format in ("responses", "chat", "anthropic"):
        made = client.post(
            "/assemble", json={"session_id": session_id, "output_format": output_format}
        )
        assert made.status_code == 201, made.text
        answer = made.json()
        shown = [entry for entry in answer["plan"] if entry["source"] == "history"]
        assert [entry["id"] for entry in shown] == ["history:0", "history:1", "history:2"]
        assert len(answer["tools"]) == 1
        with psycopg.connect(_admin_conninfo(postgres_url)) as db:
            row = db.execute(
                "SELECT plan.response::text, base.response::text FROM assemblies plan"
                " LEFT JOIN assemblies base ON base.id = plan.base_id"
                " WHERE plan.external_id = %s",
                (answer["assembly_id"],),
            ).fetchone()
        assert row is not None
        # The stored form whole again (a plan may be stored against an earlier one).
        stored = (
            json.loads(row[0])
            if row[1] is None
            else patched(json.loads(row[1]), json.loads(row[0]))
        )
        # The three shown history entries are left out of the stored plan, and the tool named.
        assert stored["shown_history"] == 3
        assert stored["tools"] == "recall"
        assert "history:0" not in json.dumps(stored["plan"])
        read = client.get(f"/assemblies/{answer['assembly_id']}")
        assert read.status_code == 200
        assert read.json()["response"] == answer
        assert json.dumps(read.json()["response"]) == json.dumps(answer)
