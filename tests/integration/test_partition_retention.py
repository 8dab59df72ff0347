"""Stored plans on PostgreSQL age out a week's partition at a time; the count bounds still hold.

Each test has a database of its own (retention drops whole partitions), and moves time by
passing `now` to the retention round, never by waiting.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sqlalchemy import Engine, func, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.domain.ids import derive_id, stateless_session_key
from app.settings import Settings
from app.storage import plans, tenant_rows
from app.storage.database import create_db_engine, create_session_factory, migrate
from app.storage.retention import prune_once
from app.storage.tables import AssemblyRow
from tests.conftest import DEFAULT_ADMIN_URL
from tests.integration.storage import new_session

MONDAY = datetime(2031, 3, 3, 12, tzinfo=UTC)
"""A Monday far from the present, so that the partitions of these tests are theirs."""


@pytest.fixture
def engine() -> Iterator[Engine]:
    import os

    admin_url = os.environ.get("CTX_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)
    admin = make_url(admin_url).set(drivername="postgresql").render_as_string(False)
    name = f"contextd_partitions_{uuid.uuid4().hex}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    migrate(url)
    engine = create_db_engine(Settings(database_url=url))
    yield engine
    engine.dispose()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _store(db: Session, *, tenant_id: int, session_pk: int | None, at: datetime, n: int) -> str:
    """A plan written at `at` (as `store_assembly` writes one, with its time given)."""
    row_id = int(db.scalar(text("SELECT nextval('assemblies_id_seq')")) or 0)
    external_id = derive_id("asm", tenant_id, row_id)
    db.execute(
        insert(AssemblyRow).values(
            id=row_id,
            external_id=external_id,
            tenant_id=tenant_id,
            session_id=session_pk,
            session_key=stateless_session_key(tenant_id) if session_pk is None else session_pk,
            plan_hash="0" * 64,
            request=json.dumps({"n": n}),
            response={},
            fingerprints=[],
            created_at=at,
        )
    )
    return external_id


def _kept(factory: sessionmaker[Session]) -> dict[int, str]:
    """Each plan's `n`, with the partition holding it."""
    with factory() as db:
        rows = db.execute(
            select(AssemblyRow.request, text("assemblies.tableoid::regclass::text"))
        ).all()
    return {json.loads(request)["n"]: partition for request, partition in rows}


def _partitions(factory: sessionmaker[Session]) -> set[str]:
    with factory() as db:
        return set(
            db.scalars(
                text(
                    "SELECT inhrelid::regclass::text FROM pg_inherits"
                    " WHERE inhparent = 'assemblies'::regclass"
                )
            )
        )


def _session(engine: Engine, tenant: str, name: str) -> tuple[int, int]:
    """(tenant id, session primary key) of a new committed session of `tenant`."""
    session_pk = new_session(engine, name, tenant=tenant)
    with create_session_factory(engine)() as db:
        return tenant_rows.ensure_tenant(db, tenant), session_pk


def test_weeks_past_retention_are_dropped_whole_and_a_write_after_a_long_pause_lands(
    engine: Engine,
) -> None:
    factory = create_session_factory(engine)
    settings = Settings(database_url=str(engine.url), assembly_retention_days=30)
    tenant_id, session_pk = _session(engine, "partitions", "weekly")
    prune_once(factory, settings, now=MONDAY)  # the service running that week
    with factory() as db:
        _store(db, tenant_id=tenant_id, session_pk=session_pk, at=MONDAY + timedelta(days=1), n=1)
        _store(db, tenant_id=tenant_id, session_pk=None, at=MONDAY + timedelta(days=8), n=2)
        # Written while no partition was there for it (a clock far behind): the default takes it.
        _store(db, tenant_id=tenant_id, session_pk=None, at=MONDAY - timedelta(days=90), n=3)
        db.commit()
    # Sixty days without a retention round, then a plan written before the first one.
    later = MONDAY + timedelta(days=60)
    with factory() as db:
        late_id = _store(db, tenant_id=tenant_id, session_pk=session_pk, at=later, n=4)
        db.commit()
    before = _kept(factory)
    deleted = prune_once(factory, settings, now=later)
    after = _kept(factory)
    with factory() as db:
        found = plans.get_assembly(db, tenant_id=tenant_id, external_id=late_id)
    assert before == {
        1: "assemblies_p20310303",
        2: "assemblies_p20310310",
        3: "assemblies_default",
        4: "assemblies_default",
    }
    # The late plan moved into its week's partition, made with the next week's; the weeks past
    # the cutoff went whole; the stray plan past the cutoff was deleted by age.
    assert after == {4: "assemblies_p20310428"}
    assert deleted == 1
    assert _partitions(factory) >= {"assemblies_p20310428", "assemblies_p20310505"}
    assert not {"assemblies_p20310303", "assemblies_p20310310"} & _partitions(factory)
    assert json.loads(found.request) == {"n": 4}


def test_session_and_tenant_bounds_hold_across_partitions(engine: Engine) -> None:
    factory = create_session_factory(engine)
    settings = Settings(
        database_url=str(engine.url),
        assembly_retention_days=30,
        assembly_retention_per_session=2,
        assembly_retention_per_tenant=3,
        assembly_retention_batch=1,
    )
    tenant_id, session_pk = _session(engine, "bounded", "busy")
    prune_once(factory, settings, now=MONDAY)
    with factory() as db:
        # Three plans of one session over two weeks, then two stateless ones.
        for n, days in enumerate((1, 2, 8)):
            _store(db, tenant_id=tenant_id, session_pk=session_pk, at=MONDAY + timedelta(days), n=n)
        for n in (3, 4):
            _store(db, tenant_id=tenant_id, session_pk=None, at=MONDAY + timedelta(days=9), n=n)
        db.commit()
    deleted = prune_once(factory, settings, now=MONDAY + timedelta(days=10))
    with factory() as db:
        total = db.scalar(select(func.count()).select_from(AssemblyRow))
    # The session keeps its newest two (1, 2), the tenant its newest three (2 to 4).
    assert sorted(_kept(factory)) == [2, 3, 4]
    assert (deleted, total) == (2, 3)
