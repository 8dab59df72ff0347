"""A turn run through the use cases alone, no HTTP: append, assemble, read the plan back,
compact and recall, on real PostgreSQL. What bench, the CLI or another front end would call."""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import anyio
import orjson

from app.clock import system_clock
from app.contract.assembly import AssembleRequest
from app.contract.compaction import CompactRequest
from app.contract.recall import RecallRequest
from app.contract.sessions import AppendRequest
from app.hooks import HookCaller
from app.settings import Settings
from app.storage import session_rows, tenant_rows
from app.storage.database import create_db_engine, create_session_factory
from app.usecases.append import append
from app.usecases.assemble import assemble, stored_assembly
from app.usecases.compact import compact
from app.usecases.plan_record import ReceivedRequest
from app.usecases.recall import recall
from tests.builders import long_text, tool_call, tool_output, user_msg


def test_a_turn_runs_through_the_use_cases_without_http(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url)
    engine = create_db_engine(settings)
    sessions = create_session_factory(engine)
    with sessions() as db:
        tenant = tenant_rows.ensure_tenant(db, "usecases")
        session_rows.create_session(
            db,
            tenant_id=tenant,
            external_id="walk",
            encoding="o200k_base",
            context_window=8_000,
            model=None,
            attributes={"metadata": {}, "hooks": {}},
            derive_id=str,
        )
        db.commit()
        items = [user_msg("Why does test_parse fail?")]
        for call in ("c1", "c2", "c3", "c4"):
            items += [tool_call(call, "shell"), tool_output(call, long_text(1_000))]
        appended = append(
            db,
            tenant_id=tenant,
            session_id="walk",
            body=AppendRequest(items=items),
            settings=settings,
            now=datetime.now(UTC),
        )
        request = AssembleRequest(session_id="walk")
        assembled = assemble(
            db,
            tenant_id=tenant,
            request=request,
            received=ReceivedRequest.of(request),
            settings=settings,
            now=system_clock(),
        )
        assembled.after_answer()
    with sessions() as db:
        stored = stored_assembly(db, tenant_id=tenant, assembly_id=assembled.assembly_id)
        # Hooks run on the event loop that handed compaction its thread, as a server does.
        compacted = anyio.run(
            anyio.to_thread.run_sync,
            functools.partial(
                compact,
                db,
                tenant_id=tenant,
                body=CompactRequest(session_id="walk", strategy="clear_tool_results"),
                settings=settings,
                hook_caller=HookCaller(settings),
                now=datetime.now(UTC),
            ),
        )
        read_back = recall(
            db,
            tenant_id=tenant,
            session_id="walk",
            body=RecallRequest(seq=3, max_lines=1),
            settings=settings,
        )
    engine.dispose()
    assert (appended.answer.first_seq, appended.answer.last_seq) == (1, 9)
    assert stored["response"] == orjson.loads(orjson.dumps(assembled.answer))
    assert stored["session_id"] == "walk"
    assert [item["id"] for item in assembled.answer["items"]][-1] == "history:8"
    assert compacted.applied
    assert compacted.tokens_after < compacted.tokens_before
    assert read_back.seq == 3
    assert read_back.text == long_text(1_000).splitlines(keepends=True)[0]
