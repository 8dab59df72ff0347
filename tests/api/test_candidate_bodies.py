"""Candidate bodies are stored once per session, by digest, and read back into their requests.

A runtime that offers the same files on every call stores each once per session (once per
tenant for stateless calls); every plan still reads back its request exactly as received, its
answer exactly as sent, and replays. Retention deletes only bodies no kept plan can name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.addressing import body_digest, digest_of
from app.main import create_app
from app.settings import Settings
from app.storage import bodies
from app.storage.database import create_db_engine, create_session_factory
from app.storage.retention import prune_once
from app.storage.tables import CandidateBody
from tests.builders import user_msg
from tests.conftest import _admin_conninfo

OWN_KEY = 2**62 - 7
"""A session key no session of the test run holds."""
FILE = "def parse(text):\n    return text.split(',')\n" * 20
NOTES = {"type": "message", "role": "user", "content": "notes on parse\n" * 40}


def _request(session_id: str | None, relevance: float) -> dict[str, Any]:
    request: dict[str, Any] = {
        "sources": [
            {
                "source": "files",
                "items": [
                    {"id": "parse.py", "content": FILE, "relevance": relevance},
                    {"id": "notes", "item": NOTES},
                    {"id": "tiny", "content": "a small note"},
                ],
            }
        ]
    }
    if session_id is not None:
        request["session_id"] = session_id
    return request


def _stored(postgres_url: str, assembly_ids: list[str]) -> list[tuple[str, int]]:
    """Each plan's stored request text and the bodies its session key holds."""
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        rows = db.execute(
            "SELECT a.request, (SELECT count(*) FROM candidate_bodies b"
            " WHERE b.session_key = a.session_key AND b.tenant_id = a.tenant_id)"
            " FROM assemblies a WHERE a.external_id = ANY(%s) ORDER BY a.id",
            (assembly_ids,),
        ).fetchall()
    return [(str(request), int(count)) for request, count in rows]


@pytest.mark.parametrize("mode", ["session", "stateless"])
def test_a_file_offered_on_every_call_is_stored_once_and_read_back_exactly(
    client: TestClient, postgres_url: str, session_id: str, mode: str
) -> None:
    named = session_id if mode == "session" else None
    if named is not None:
        client.post("/sessions", json={"session_id": named}).raise_for_status()
        client.post(f"/sessions/{named}/items", json={"items": [user_msg("fix parse")]})
    sent = [_request(named, relevance) for relevance in (0.9, 0.4)]
    answers = []
    for request in sent:
        made = client.post("/assemble", json=request)
        assert made.status_code == 201, made.text
        answers.append(made.json())
    ids = [answer["assembly_id"] for answer in answers]
    stored = _stored(postgres_url, ids)
    # Each plan's request names the file and the notes by digest; the small note stays.
    file_digest = body_digest(FILE)
    assert file_digest is not None
    for text, _ in stored:
        assert FILE not in text
        assert "notes on parse" not in text
        assert "a small note" in text
        assert file_digest in text
    if mode == "session":  # the session holds the two bodies once
        assert [count for _, count in stored] == [2, 2]
    for request, answer in zip(sent, answers, strict=True):
        read = client.get(f"/assemblies/{answer['assembly_id']}").json()
        assert json.dumps(read["request"]) == json.dumps(request)
        assert json.dumps(read["response"]) == json.dumps(answer)
    replayed = client.post(f"/assemblies/{ids[0]}/replay", json={})
    assert replayed.status_code == 201, replayed.text
    assert replayed.json()["diff"] == {
        "added": [],
        "removed": [],
        "moved": [],
        "tokens_delta": 0,
        "prefix_break": None,
    }


def test_bodies_live_as_long_as_a_kept_plan_can_name_them(postgres_url: str) -> None:
    """A body a plan names at time T is refreshed when older than `REFRESH`, and retention
    with a plan cutoff C deletes only bodies older than C - `REFRESH`."""
    engine = create_db_engine(Settings(database_url=postgres_url))
    factory = create_session_factory(engine)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    body = {digest_of(b'"old file"'): b'"old file"'}
    tenant_id = _tenant(postgres_url)

    def created_at() -> datetime | None:
        with factory() as db:
            return db.scalar(
                select(CandidateBody.created_at).where(
                    CandidateBody.session_key == OWN_KEY,
                    CandidateBody.tenant_id == tenant_id,
                    CandidateBody.digest.in_(body),
                )
            )

    with factory() as db:
        bodies.put_bodies(db, tenant_id=tenant_id, session_key=OWN_KEY, bodies=body, now=start)
        db.commit()
    assert created_at() == start
    # Named again within REFRESH: as it was. Named later: refreshed.
    for moment, expected in (
        (start + bodies.REFRESH / 2, start),
        (start + bodies.REFRESH * 3, start + bodies.REFRESH * 3),
    ):
        with factory() as db:
            bodies.put_bodies(db, tenant_id=tenant_id, session_key=OWN_KEY, bodies=body, now=moment)
            db.commit()
        assert created_at() == expected
    refreshed = start + bodies.REFRESH * 3
    for cutoff, kept in (
        (refreshed + bodies.REFRESH, True),
        (refreshed + timedelta(days=2), False),
    ):
        with factory() as db:
            bodies.prune_bodies(db, plans_older_than=cutoff, limit=100)
            db.commit()
        assert (created_at() is not None) is kept
    # A retention round keeps what a plan of the oldest week it keeps may name, then deletes.
    body = {digest_of(b'"another file"'): b'"another file"'}
    with factory() as db:
        bodies.put_bodies(db, tenant_id=tenant_id, session_key=OWN_KEY, bodies=body, now=start)
        db.commit()
    settings = Settings(database_url=postgres_url)
    kept_for = timedelta(days=settings.assembly_retention_days + 7) + bodies.REFRESH
    for moment, kept in ((start + kept_for, True), (start + kept_for + timedelta(hours=1), False)):
        prune_once(factory, settings, now=moment)
        assert (created_at() is not None) is kept
    engine.dispose()


def _tenant(postgres_url: str) -> int:
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        row = db.execute("SELECT id FROM tenants ORDER BY id LIMIT 1").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def sqlite_client(sqlite_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=sqlite_url))) as service:
        yield service


def test_sqlite_stores_bodies_by_digest_too(sqlite_client: TestClient, session_id: str) -> None:
    sqlite_client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    request = _request(session_id, 0.7)
    answer = sqlite_client.post("/assemble", json=request).json()
    read = sqlite_client.get(f"/assemblies/{answer['assembly_id']}").json()
    assert json.dumps(read["request"]) == json.dumps(request)
    assert json.dumps(read["response"]) == json.dumps(answer)
