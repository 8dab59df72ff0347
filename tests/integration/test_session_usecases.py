"""The session use cases called directly, no HTTP, on real PostgreSQL: a session created (and
created again), its goal and world state, a retraction and a reset, a fork and its conclusion
back in the parent, the log paged and the session read whole. Each writes at the time it is
given, and the answers are the contract's own models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.contract.isolation import ConclusionRequest, ForkRequest
from app.contract.projection import RetractionRequest
from app.contract.sessions import CreateSessionRequest
from app.contract.world import GoalRequest, WorldStateRequest
from app.domain.compaction import CompactionInput, CompactionParams, plan_compaction
from app.domain.errors import Conflict, NotAChildSession, SequenceConflict
from app.domain.facts import NewFact
from app.settings import Settings
from app.storage import fact_log, session_rows, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from app.tokens import token_counter
from app.usecases import isolation, projection, sessions, world
from app.usecases.compact import _append_compaction
from app.usecases.loaded_history import load_history
from tests.builders import assistant_msg, tool_call, tool_output, user_msg

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_a_session_lives_through_its_use_cases(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url)
    engine = create_db_engine(settings)
    with create_session_factory(engine)() as db:
        tenant = tenant_rows.ensure_tenant(db, "session-usecases")
        db.commit()
        body = CreateSessionRequest(session_id=session_id, context_window=20_000)
        created, new = sessions.create_session(db, tenant_id=tenant, body=body, settings=settings)
        again, new_again = sessions.create_session(
            db, tenant_id=tenant, body=body, settings=settings
        )
        with pytest.raises(Conflict):
            sessions.create_session(
                db,
                tenant_id=tenant,
                body=CreateSessionRequest(session_id=session_id, context_window=30_000),
                settings=settings,
            )
        db.rollback()
        goal = world.put_goal(
            db,
            tenant_id=tenant,
            session_id=session_id,
            body=GoalRequest(text="fix the failing parser test"),
            now=START,
        )
        state = world.put_world_state(
            db,
            tenant_id=tenant,
            session_id=session_id,
            body=WorldStateRequest(sections={"rules": ["no network"]}),
            now=START + timedelta(seconds=1),
        )
        session = session_rows.get_session(db, tenant_id=tenant, external_id=session_id, lock=True)
        items = [user_msg("why does it fail?"), tool_call("c1"), tool_output("c1", "a stack")]
        fact_log.append_facts(
            db,
            session=session,
            facts=[repository_fact(item) for item in items],
            recorded_at=START + timedelta(seconds=2),
        )
        db.commit()
        retracted = projection.retract(
            db,
            tenant_id=tenant,
            session_id=session_id,
            seq=RetractionRequest().seq,
            now=START + timedelta(seconds=3),
        )
        fork = isolation.create_child(
            db,
            tenant_id=tenant,
            parent_id=session_id,
            body=ForkRequest(session_id=f"{session_id}-fork", inherit={"rules": True}),
            now=START + timedelta(seconds=4),
        )
        merged = isolation.merge(
            db,
            tenant_id=tenant,
            child_id=fork.session_id,
            body=ConclusionRequest(conclusion=assistant_msg("the parser drops the last line")),
            now=START + timedelta(seconds=5),
        )
        with pytest.raises(NotAChildSession):
            isolation.merge(
                db,
                tenant_id=tenant,
                child_id=session_id,
                body=ConclusionRequest(conclusion=assistant_msg("a root has no parent")),
                now=START,
            )
        db.rollback()
        reset = projection.reset(
            db, tenant_id=tenant, session_id=session_id, now=START + timedelta(seconds=6)
        )
        page = sessions.items_page(
            db, tenant_id=tenant, session_id=session_id, after_seq=0, limit=3
        )
        rest = sessions.items_page(
            db, tenant_id=tenant, session_id=session_id, after_seq=3, limit=100
        )
        detail = sessions.session_detail(
            db, tenant_id=tenant, session_id=session_id, settings=settings
        )
    engine.dispose()

    assert (new, new_again, again) == (True, False, created)
    assert (goal.version, goal.seq, state.version) == (1, 1, 1)
    logged = [*page.items, *rest.items]
    seq_of = {fact.type: fact.seq for fact in logged}
    # The retraction hid the newest item and the call it answers: pairing holds.
    assert retracted.retracted == [seq_of["function_call"], seq_of["function_call_output"]]
    assert (fork.kind, fork.parent_id, fork.inherit) == ("fork", session_id, {"rules": True})
    assert (merged.parent_id, reset.seq) == (session_id, merged.seq + 1)
    assert [fact.seq for fact in logged] == list(range(1, reset.seq + 1))
    assert page.next_after_seq == 3
    assert rest.next_after_seq is None
    assert [fact.type for fact in logged] == [
        "contextd.goal",
        "contextd.world_state",
        "message",  # the world state's fragment in the history
        "message",
        "function_call",
        "function_call_output",
        "contextd.retraction",
        "contextd.child",
        "message",  # the fork's conclusion, as the child gave it
        "contextd.reset",
    ]
    # Every fact carries the time its use case was given.
    assert [fact.recorded_at for fact in logged] == [
        START + timedelta(seconds=s) for s in (0, 1, 1, 2, 2, 2, 3, 4, 5, 6)
    ]
    assert detail.goal == {"version": 1, "text": "fix the failing parser test"}
    assert (detail.item_count, detail.world_state_version) == (reset.seq, 1)
    assert detail.active_tokens == 0  # the reset leaves the active history empty


def repository_fact(item: dict[str, Any]) -> NewFact:
    """A client item as the append use case writes it, counted as one token."""
    return NewFact(type=str(item["type"]), item=item, tokens=1, provenance={})


def test_a_compaction_of_a_history_that_moved_on_writes_nothing(
    postgres_url: str, session_id: str
) -> None:
    """The compaction's fact is written only after the facts its history was read up to: a log
    that moved on since is a `SequenceConflict`, and the log keeps what it had."""
    settings = Settings(database_url=postgres_url)
    engine = create_db_engine(settings)
    with create_session_factory(engine)() as db:
        tenant = repository_tenant(db)
        sessions.create_session(
            db,
            tenant_id=tenant,
            body=CreateSessionRequest(session_id=session_id),
            settings=settings,
        )
        session = session_rows.get_session(db, tenant_id=tenant, external_id=session_id, lock=True)
        items = [user_msg("list the files"), tool_call("c1"), tool_output("c1", "a.py b.py")]
        fact_log.append_facts(
            db, session=session, facts=[repository_fact(i) for i in items], recorded_at=START
        )
        db.commit()
        loaded = load_history(db, session)
        result = plan_compaction(
            CompactionInput(
                history=loaded.active.entries(loaded.items),
                strategy="truncate",
                params=CompactionParams(keep_recent=1),
                goal=None,
            ),
            count_tokens=token_counter("o200k_base"),
        )
        with pytest.raises(SequenceConflict):
            _append_compaction(
                db,
                tenant_id=tenant,
                session_id=session_id,
                expected_last_seq=2,  # read before the output came in
                result=result,
                requested_strategy="truncate",
                now=START,
            )
        db.rollback()
        last_seq = session_rows.get_session(db, tenant_id=tenant, external_id=session_id).last_seq
    engine.dispose()

    assert last_seq == 3


def repository_tenant(db: Any) -> int:
    tenant = tenant_rows.ensure_tenant(db, "session-usecases")
    db.commit()
    return tenant
