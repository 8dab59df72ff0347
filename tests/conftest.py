"""Shared fixtures: a throwaway PostgreSQL database per run (migrated), a SQLite file, clients.

Nothing here mocks the database: storage and API tests talk to a real PostgreSQL server.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from app.settings import Settings
from app.storage.database import create_db_engine, migrate
from tests.integration.storage import server_timeline

TRAJECTORIES = sorted((Path(__file__).parent / "data" / "trajectories").glob("*.jsonl"))
DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def load_trajectory(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _admin_conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test run, dropped afterwards."""
    admin_url = os.environ.get("CTX_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)
    # A name no other run can hold: a process id repeats across machines and containers that
    # share one server, and dropping another run's database would kill it mid-test.
    name = f"contextd_test_{uuid.uuid4().hex}"
    with psycopg.connect(_admin_conninfo(admin_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    migrate(url)
    yield url
    with psycopg.connect(_admin_conninfo(admin_url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_timeline(postgres_url: str) -> int:
    """The timeline the test PostgreSQL server writes on, which each fact records."""
    engine = create_db_engine(Settings(database_url=postgres_url))
    try:
        timeline = server_timeline(engine)
    finally:
        engine.dispose()
    assert timeline is not None
    return timeline


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'contextd.db'}"
    migrate(url)
    return url


@pytest.fixture(params=["postgresql", "sqlite"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Storage contract tests run on both engines."""
    fixture = "postgres_url" if request.param == "postgresql" else "sqlite_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture(scope="session")
def client(postgres_url: str) -> Iterator[TestClient]:
    """An open (single-tenant) service on the test PostgreSQL database."""
    from app.main import create_app

    with TestClient(create_app(Settings(database_url=postgres_url))) as service:
        yield service


_ids = itertools.count(1)


@pytest.fixture
def session_id(request: pytest.FixtureRequest) -> str:
    """A session id unique to this test (the test database is shared by the run)."""
    return f"{request.node.name[:150]}-{next(_ids)}".replace("[", ".").replace("]", "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The end-to-end modules first, the failover's leading: with each module on one worker
    (`--dist loadfile`), the slowest start at once rather than set the end of the run."""
    items.sort(
        key=lambda item: (item.path.parent.name != "e2e", item.path.name != "test_failover.py")
    )
