"""Retention of stored plans deletes assemblies by age and count, and never touches facts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from app.settings import Settings
from app.storage import evaluations, plans, retention, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from app.storage.retention import prune_once
from app.storage.tables import AssemblyRow, CheckpointRow, EvaluationRow, Fact
from tests.builders import user_msg
from tests.integration.storage import append_items, new_session


def test_retention_keeps_newest_plans_per_session_and_every_fact(
    postgres_url: str, session_id: str
) -> None:
    engine = create_db_engine(Settings(database_url=postgres_url))
    factory = create_session_factory(engine)
    session_pk = new_session(engine, session_id)
    with factory() as db:
        tenant_id = tenant_rows.ensure_tenant(db, "storage-tests")
        append_items(db, session_pk, [user_msg("x")])
        for n in range(3):
            plans.store_assembly(
                db,
                plans.NewAssembly(
                    tenant_id=tenant_id,
                    session_pk=session_pk,
                    as_of_seq=1,
                    unit=None,
                    phase=None,
                    plan_hash="0" * 64,
                    request=f'{{"n": {n}}}',
                    response={},
                    fingerprints=[],
                ),
                row_id=None,
                derive_id=lambda row_id: f"asm-retention-{row_id}",
            )
        db.commit()

    def remaining() -> tuple[list[int], int]:
        with factory() as db:
            kept = db.scalars(
                select(AssemblyRow.request).where(AssemblyRow.session_id == session_pk)
            ).all()
            facts = db.scalar(select(func.count()).where(Fact.session_id == session_pk))
            return sorted(json.loads(r)["n"] for r in kept), int(facts or 0)

    settings = Settings(database_url=postgres_url, assembly_retention_per_session=2)
    prune_once(factory, settings)
    assert remaining() == ([1, 2], 1)
    with factory() as db:
        deleted = retention.prune_assemblies(
            db,
            older_than=datetime.now(UTC) + timedelta(days=1),
            keep_per_session=10,
            keep_per_tenant=10,
            limit=1_000_000,
        )
        db.commit()
    assert deleted >= 2
    assert remaining() == ([], 1)
    engine.dispose()


def test_retention_bounds_each_tenant_and_deletes_in_committed_batches(
    database_url: str, session_id: str
) -> None:
    """A tenant keeps its newest `assembly_retention_per_tenant` plans across its sessions and
    units; a tenant within the bound loses none; a round deletes in batches of
    `assembly_retention_batch`, as many as it takes."""
    engine = create_db_engine(Settings(database_url=database_url))
    factory = create_session_factory(engine)
    crowded, quiet = f"crowded-{session_id}", f"quiet-{session_id}"
    with factory() as db:
        tenants = {name: tenant_rows.ensure_tenant(db, name) for name in (crowded, quiet)}
        for name, count in ((crowded, 5), (quiet, 2)):
            for n in range(count):
                plans.store_assembly(
                    db,
                    plans.NewAssembly(
                        tenant_id=tenants[name],
                        session_pk=None,
                        as_of_seq=None,
                        unit=f"unit-{n % 2}",
                        phase=None,
                        plan_hash="0" * 64,
                        request=f'{{"n": {n}}}',
                        response={},
                        fingerprints=[],
                    ),
                    row_id=None,
                    derive_id=lambda row_id: f"asm-retention-{row_id}",
                )
        db.commit()
    settings = Settings(
        database_url=database_url,
        assembly_retention_per_tenant=2,
        assembly_retention_batch=1,
    )
    with factory() as db:
        first = retention.prune_assemblies(
            db,
            older_than=datetime.now(UTC) - timedelta(days=30),
            keep_per_session=1_000,
            keep_per_tenant=2,
            limit=1,
        )
        db.commit()
    deleted = first + prune_once(factory, settings)
    kept = _kept(factory, tenants)
    engine.dispose()
    assert first == 1  # a statement deletes at most its limit
    assert kept == {crowded: [3, 4], quiet: [0, 1]}
    assert deleted >= 3  # one batch each, and whatever other tenants held beyond two


def _kept(factory: Any, tenants: dict[str, int]) -> dict[str, list[int]]:
    with factory() as db:
        return {
            name: sorted(
                json.loads(request)["n"]
                for request in db.scalars(
                    select(AssemblyRow.request).where(AssemblyRow.tenant_id == tenant_id)
                )
            )
            for name, tenant_id in tenants.items()
        }


def test_retention_deletes_evaluation_jobs_that_have_not_moved_for_as_long_as_a_plan_is_kept(
    postgres_url: str,
) -> None:
    settings = Settings(database_url=postgres_url, assembly_retention_days=7)
    engine = create_db_engine(settings)
    factory = create_session_factory(engine)
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    ages = {"eval_old_done": 8, "eval_old_running": 30, "eval_recent": 6}
    with factory() as db:
        tenant_id = tenant_rows.ensure_tenant(db, "evaluation-retention")
        for evaluation_id, days in ages.items():
            evaluations.start(
                db,
                evaluation_id=evaluation_id,
                tenant_id=tenant_id,
                session_id="s",
                calls_total=3,
                now=now - timedelta(days=days),
            )
        db.commit()

    prune_once(factory, settings, now=now)

    with factory() as db:
        kept = set(db.scalars(select(EvaluationRow.id).where(EvaluationRow.id.in_(ages))))
    engine.dispose()
    assert kept == {"eval_recent"}


def test_retention_deletes_the_checkpoints_of_sessions_idle_for_as_long_as_it_keeps_them(
    postgres_url: str,
) -> None:
    """A session's links go together, once its newest one is older than the setting: a chain
    is never cut in two (its whole link may be older than its deltas)."""
    settings = Settings(database_url=postgres_url, checkpoint_retention_days=30)
    engine = create_db_engine(settings)
    factory = create_session_factory(engine)
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    ages = {"resumed": (40, 2), "idle": (40, 35), "recent": (5,)}
    pks = {name: new_session(engine, f"checkpoint-retention-{name}") for name in ages}
    with factory() as db:
        append_items(db, pks["idle"], [user_msg("hello")])
        db.commit()
    with factory() as db:
        for name, days in ages.items():
            for seq, age in enumerate(days, start=1):
                db.add(
                    CheckpointRow(
                        session_id=pks[name],
                        last_seq=seq,
                        base_seq=1,
                        previous_seq=None if seq == 1 else seq - 1,
                        previous_digest=None if seq == 1 else "0" * 64,
                        derivation="0" * 64,
                        log_digest="0" * 64,
                        body_digest="0" * 64,
                        body=b"body",
                        created_at=now - timedelta(days=age),
                    )
                )
        db.commit()

    prune_once(factory, settings, now=now)

    with factory() as db:
        kept = db.execute(
            select(CheckpointRow.session_id, func.count())
            .where(CheckpointRow.session_id.in_(pks.values()))
            .group_by(CheckpointRow.session_id)
        ).all()
        facts = db.scalar(select(func.count()).where(Fact.session_id == pks["idle"]))
    engine.dispose()
    assert dict(kept) == {pks["resumed"]: 2, pks["recent"]: 1}
    assert facts == 1
