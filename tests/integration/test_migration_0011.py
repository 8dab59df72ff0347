"""Migration 20261205_0011 on PostgreSQL keeps old plans and old sessions working.

Plans and a session are made by the service on one database; the same rows are written, as the
schema before the migration held them (the session under a serial id, as sessions were made),
into a second database at 20261204_0010, which is then migrated. Read back there, every plan is
what the first database answers, its replay too, and the old session goes on.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, create_engine, insert, text
from sqlalchemy.engine import make_url

from app.domain.json_delta import patched
from app.main import create_app
from app.settings import Settings
from app.storage.database import migrate
from tests.builders import user_msg
from tests.conftest import DEFAULT_ADMIN_URL

BEFORE = "20261204_0010"
# A small document: its body stays in the stored request (no body table the old schema lacks).
DOCUMENT = {"id": "a", "content": "alpha " * 20, "layer": "retrieval", "relevance": 0.9}
SOURCES = [{"source": "docs", "items": [DOCUMENT]}]


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    """Two empty databases: one for the service as it is, one for the schema before."""
    admin_url = os.environ.get("CTX_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)
    admin = make_url(admin_url).set(drivername="postgresql").render_as_string(False)
    names = [f"contextd_migration_{uuid.uuid4().hex}" for _ in range(2)]
    with psycopg.connect(admin, autocommit=True) as connection:
        for name in names:
            connection.execute(f'CREATE DATABASE "{name}"')
    now, before = (
        make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        for name in names
    )
    yield now, before
    with psycopg.connect(admin, autocommit=True) as connection:
        for name in names:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _without_ids(value: Any) -> Any:
    """`value` without the ids a replay draws anew, the prompt cache key (derived from the
    session's row id, which the copy changed), and the seconds since the lineage's last call
    (the replays run at different times)."""
    if isinstance(value, dict):
        drawn = ("assembly_id", "prompt_cache_key", "idle_seconds")
        return {k: _without_ids(v) for k, v in value.items() if k not in drawn}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _turns(service: TestClient) -> dict[str, Any]:
    """A session's plan and a stateless one, as answered, read back and replayed."""
    service.post("/sessions", json={"session_id": "kept"}).raise_for_status()
    service.post("/sessions/kept/items", json={"items": [user_msg("first")]}).raise_for_status()
    made = service.post("/assemble", json={"session_id": "kept", "sources": SOURCES})
    stateless = service.post("/assemble", json={"sources": SOURCES})
    assert (made.status_code, stateless.status_code) == (201, 201), made.text
    return {"session": made.json()["assembly_id"], "stateless": stateless.json()["assembly_id"]}


def _read_back(service: TestClient, ids: dict[str, str]) -> dict[str, Any]:
    return {
        kind: (
            service.get(f"/assemblies/{assembly_id}").json(),
            _without_ids(
                service.post(
                    f"/assemblies/{assembly_id}/replay",
                    json={"overrides": {"drop_sources": ["docs"]}},
                ).json()
            ),
        )
        for kind, assembly_id in ids.items()
    }


def _stored_whole(plans: list[dict[str, Any]], bases: dict[int, int]) -> list[dict[str, Any]]:
    """Plans as a database before plan deltas holds them: each stored whole (`bases`: the base
    each plan was stored against, by id)."""
    by_id = {plan["id"]: plan for plan in plans}
    whole = []
    for plan in plans:
        base = by_id.get(bases.get(plan["id"]))
        if base is not None:
            plan["response"] = patched(base["response"], plan["response"])
            plan["fingerprints"] = patched(base["fingerprints"], plan["fingerprints"])
        whole.append(plan)
    return whole


def _copy_as_before(source_url: str, target_url: str) -> None:
    """The source's tenants, session, facts and plans into the target (at `BEFORE`), the
    session under the serial id 1 and the plans without the columns the migration adds."""
    source, target = create_engine(source_url), create_engine(target_url)
    tables = MetaData()
    tables.reflect(target, only=["tenants", "sessions", "facts", "assemblies"])
    with source.connect() as reading, target.begin() as writing:
        (derived,) = reading.execute(text("SELECT id FROM sessions")).scalars()
        legacy = {derived: 1}
        for name in ("tenants", "sessions", "facts", "assemblies"):
            table = tables.tables[name]
            rows = [dict(row) for row in reading.execute(table.select()).mappings()]
            if name == "assemblies":
                found = reading.execute(text("SELECT id, base_id FROM assemblies")).all()
                bases: dict[int, int] = {row.id: row.base_id for row in found}
                rows = _stored_whole(rows, bases)
            column = {"sessions": "id", "facts": "session_id", "assemblies": "session_id"}
            for row in rows:
                if name in column and row[column[name]] is not None:
                    row[column[name]] = legacy[row[column[name]]]
            writing.execute(insert(table), rows)
        writing.execute(text("SELECT setval('sessions_id_seq', 1)"))
        writing.execute(
            text("SELECT setval('assemblies_id_seq', (SELECT max(id) FROM assemblies))")
        )
    source.dispose()
    target.dispose()


def test_old_plans_and_sessions_read_back_identically_after_the_migration(
    databases: tuple[str, str],
) -> None:
    now_url, before_url = databases
    migrate(now_url)
    with TestClient(create_app(Settings(database_url=now_url))) as service:
        ids = _turns(service)
        expected = _read_back(service, ids)
    migrate(before_url, BEFORE)
    _copy_as_before(now_url, before_url)
    migrate(before_url)
    with TestClient(create_app(Settings(database_url=before_url))) as service:
        read = _read_back(service, ids)
        again = service.post("/sessions", json={"session_id": "kept"})
        appended = service.post("/sessions/kept/items", json={"items": [user_msg("second")]})
        chained = service.post("/assemble", json={"session_id": "kept", "sources": SOURCES})
        fresh = service.post("/sessions", json={"session_id": "new"})
    assert read == expected
    # The old session is found by name (its serial id), not created again, and goes on: its
    # next plan chains to the plan made before the migration.
    assert (again.status_code, appended.status_code, chained.status_code) == (200, 201, 201)
    assert chained.json()["cache"]["reused_prefix_tokens"] > 0
    assert fresh.status_code == 201
