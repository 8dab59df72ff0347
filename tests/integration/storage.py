"""Small builders for storage tests: a session, its tenant, a batch's facts, and appends under
the session's row lock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from app.domain.facts import NewFact, item_fact
from app.storage import fact_log, session_rows, tenant_rows
from app.storage.database import create_session_factory
from app.storage.tables import SessionRow
from app.tokens import token_counter


def server_timeline(engine: Engine) -> int | None:
    """The timeline the database writes on now, as a fact records it (None on SQLite: no
    replication)."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        wal_file = connection.scalar(text("SELECT pg_walfile_name(pg_current_wal_lsn())"))
    return int(wal_file[:8], 16)


def new_session(engine: Engine, name: str, *, tenant: str = "storage-tests") -> int:
    """A committed session of `tenant`; returns its primary key."""
    with create_session_factory(engine)() as db:
        tenant_id = tenant_rows.ensure_tenant(db, tenant)
        row, _ = session_rows.create_session(
            db,
            tenant_id=tenant_id,
            external_id=name,
            encoding="o200k_base",
            context_window=1000,
            model=None,
            attributes={},
            derive_id=str,
        )
        db.commit()
        return row.id


def append_items(
    db: Session,
    session_pk: int,
    items: list[dict[str, object]],
    *,
    unit: str | None = None,
    phase: str | None = None,
    idempotency_key: str | None = None,
    expected_last_seq: int | None = None,
) -> fact_log.AppendResult:
    """Append `items` (one token each) the way the API does: under the session's row lock."""
    session = db.scalars(
        select(SessionRow).where(SessionRow.id == session_pk).with_for_update()
    ).one()
    facts = [NewFact(type=str(i["type"]), item=i, tokens=1, provenance={}) for i in items]
    return fact_log.append_facts(
        db,
        session=session,
        facts=facts,
        unit=unit,
        phase=phase,
        idempotency_key=idempotency_key,
        expected_last_seq=expected_last_seq,
        recorded_at=datetime.now(UTC),
    )


def storage_tenant(engine: Engine, name: str = "storage-tests") -> int:
    """The tenant `name`, made if need be and committed."""
    with create_session_factory(engine)() as db:
        tenant_id = tenant_rows.ensure_tenant(db, name)
        db.commit()
        return tenant_id


def facts_of(
    items: list[dict[str, Any]], seen: list[str] | None = None
) -> Callable[[str], list[NewFact]]:
    """The batch's facts counted in the encoding asked for, noting each encoding in `seen`."""

    def facts_for(encoding: str) -> list[NewFact]:
        if seen is not None:
            seen.append(encoding)
        count = token_counter(encoding)
        return [item_fact(item, provenance={}, count_tokens=count) for item in items]

    return facts_for
