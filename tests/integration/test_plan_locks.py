"""A plan written after its answer holds its locks until then, and never longer, on PostgreSQL."""

from __future__ import annotations

import pytest

from app.domain.errors import NotFound
from app.settings import Settings
from app.storage import plans, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from tests.integration.storage import new_session


def test_a_plan_write_that_fails_releases_the_locks_its_readers_wait_on(
    postgres_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url, db_timeout_seconds=2))
    factory = create_session_factory(engine)
    session_pk = new_session(engine, session_id)
    with factory() as db:
        tenant_id = tenant_rows.ensure_tenant(db, "storage-tests")
    db = factory()
    _, slot = plans.open_assembly(db, tenant_id=tenant_id, session_id=session_id, unit=None)
    # No such tenant: the insert breaks its foreign key.
    unstorable = plans.NewAssembly(
        tenant_id=-1,
        session_pk=session_pk,
        as_of_seq=0,
        unit=None,
        phase=None,
        plan_hash="0" * 64,
        request="{}",
        response={},
        fingerprints=[],
    )
    assembly_id, write = plans.store_or_defer(db, lambda: unstorable, tenant_id=-1, slot=slot)
    assert write is not None
    assert write() is None  # failed, and said so (the use case counts it)
    # Another engine's connection, as another replica's: held locks would make both calls wait
    # for the statement timeout and raise OperationalError.
    replica = create_db_engine(Settings(database_url=postgres_url, db_timeout_seconds=2))
    with create_session_factory(replica)() as other:
        session, next_slot = plans.open_assembly(
            other, tenant_id=tenant_id, session_id=session_id, unit=None
        )
        with pytest.raises(NotFound):
            plans.get_assembly(other, tenant_id=-1, external_id=assembly_id)
    assert session is not None
    assert (session.id, next_slot.previous_fingerprints) == (session_pk, [])
    replica.dispose()
    engine.dispose()
