"""A database that turns read-only (a standby, a demoted primary after a failover, a read-only
spell) is answered 503 with Retry-After, one log line a request and no traceback, and the
service recovers by itself once it is writable again: the connections that reached it
read-only are replaced, not kept. Real PostgreSQL, a database of the test's own."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from app.main import create_app
from app.settings import Settings
from app.storage.database import migrate
from tests.builders import user_msg
from tests.conftest import _admin_conninfo


@pytest.fixture
def database(postgres_url: str) -> Iterator[tuple[str, str]]:
    """A migrated database of this test's own (its settings are changed), and its name."""
    name = f"contextd_readonly_{uuid.uuid4().hex}"
    admin = _admin_conninfo(postgres_url)
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    migrate(url)
    yield url, name
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _set_read_only(postgres_url: str, name: str, *, on: bool) -> None:
    with psycopg.connect(_admin_conninfo(postgres_url), autocommit=True) as db:
        if on:
            db.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            # The service's connections end: the ones it opens next are read-only.
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        else:  # the connections it holds by then stay read-only
            db.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')


def test_a_read_only_spell_is_503s_with_one_line_each_and_the_service_recovers_by_itself(
    postgres_url: str, database: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, name = database
    with TestClient(create_app(Settings(database_url=url))) as client:
        assert client.post("/sessions", json={"session_id": "s"}).status_code == 201

        def append(text: str) -> int:
            body = {"items": [user_msg(text)]}
            return client.post("/sessions/s/items", json=body).status_code

        assert append("before") == 201
        _set_read_only(postgres_url, name, on=True)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="contextd"):
            answers = []
            for n in range(6):
                for path, body in (
                    ("/sessions/s/items", {"items": [user_msg(f"{n}")]}),
                    ("/sessions", {"session_id": f"new-{n}"}),
                    ("/assemble", {"session_id": "s"}),
                ):
                    response = client.post(path, json=body)
                    answers.append((response.status_code, response.headers.get("retry-after")))
        # Reads still answer on a read-only database; every write is a 503 to retry.
        assert {status for status, _ in answers} <= {201, 503}
        assert all(retry == "5" for status, retry in answers if status == 503)
        failed = sum(status == 503 for status, _ in answers)
        assert failed >= 12  # every append and every create
        assert not [record for record in caplog.records if record.exc_info]
        # One line a failed request, and the loop pool's note of the connections the spell's
        # start broke. The app's start-up work (its plan partitions, on a thread of its own)
        # may still be reading when the spell begins: its one line is no request's.
        records = [r for r in caplog.records if r.funcName != "prune_periodically"]
        assert len(caplog.records) - len(records) <= 1
        lines = [record for record in records if record.name == "contextd"]
        assert len(lines) <= failed
        assert {record.name for record in records} <= {"contextd", "psycopg.pool"}
        assert len(records) - len(lines) <= 2, [r.getMessage() for r in records]
        _set_read_only(postgres_url, name, on=False)
        # Each pool gives up its read-only connections at the first write they refuse.
        attempts = [append(f"after {n}") for n in range(4)]
        assert 201 in attempts[:3], attempts
        assert attempts[attempts.index(201) :] == [201] * (len(attempts) - attempts.index(201))
        listed = client.get("/sessions/s/items").json()
        assert listed["items"][-1]["item"] == user_msg("after 3")
