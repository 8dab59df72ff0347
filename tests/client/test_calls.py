"""Every client method against a real server, with both clients: the answers come back as whole
typed objects, equal to what the contract says (and, where an answer is too large to spell
out, to the same request sent with plain httpx and read into the same model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextd_client import ContextdClient, models, params
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.client.conftest import API_KEY
from tests.e2e.servers import Server

NOTES: list[params.SourceSpec] = [
    {"source": "notes", "items": [{"id": "n1", "content": "def f(): pass", "relevance": 0.9}]}
]


@pytest.fixture
def raw(server: Server) -> Iterator[httpx.Client]:
    """Plain httpx on the same server: the reference the typed answers are held against."""
    headers = {"authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=server.base, headers=headers, timeout=30) as client:
        yield client


def _read(response: httpx.Response) -> Any:
    assert response.is_success, response.text
    return response.json()


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        user_msg(f"step {n}: list the files"),
        tool_call(f"c{n}", arguments='{"cmd": "ls"}'),
        tool_output(f"c{n}", f"a{n}.py\n" + "line of output\n" * 200),
        assistant_msg(f"step {n} done"),
    ]


def test_operations_answer(ctx: ContextdClient) -> None:
    assert ctx.healthz() == models.HealthResponse(status="ok")
    assert ctx.readyz() == models.HealthResponse(status="ready")
    assert "contextd_" in ctx.metrics()


def test_sessions_and_the_raw_log(
    ctx: ContextdClient, session_id: str, postgres_timeline: int
) -> None:
    created = ctx.create_session(
        session_id=session_id, model="gpt-4o", context_window=50_000, metadata={"team": "a"}
    )
    assert created == models.SessionResponse(
        session_id=session_id,
        encoding="o200k_base",
        context_window=50_000,
        usable_window=34_000,
        model="gpt-4o",
        metadata={"team": "a"},
        hooks=models.SessionHooks(pre_compact=None, session_end=None, failure_policy="fail_open"),
        compaction=models.CompactionOptions(high_watermark=0.9, low_watermark=0.25),
        cache=models.CacheTermsBody(
            read_price=0.1, write_price=1.0, ttl_seconds=300, minimum_prefix=1024, block=128
        ),
        recall_tool=True,
        tokenizer=models.TokenizerBody(
            family="openai", ratio=1.0, overhead_tokens=0.0, calibrated=False, samples=0, exact=True
        ),
        created_at=created.created_at,
        last_seq=0,
    )
    assert (
        ctx.create_session(
            session_id=session_id, model="gpt-4o", context_window=50_000, metadata={"team": "a"}
        )
        == created
    )

    batch = [user_msg("list the files"), tool_call("c1"), tool_output("c1", "a.py")]
    appended = ctx.append_items(session_id, items=batch, unit="planner", phase="explore")
    logged = list(ctx.iter_items(session_id, page_size=2))
    assert logged == [
        models.LoggedItem(
            seq=seq,
            item=item,
            type=item["type"],
            recorded_at=appended_at.recorded_at,
            unit="planner",
            phase="explore",
            tokens=appended_at.tokens,
            metadata={"harness_authored": False},
            original=None,
            timeline=postgres_timeline,
        )
        for seq, item, appended_at in zip([1, 2, 3], batch, logged, strict=True)
    ]
    assert appended == models.AppendResponse(
        first_seq=1,
        last_seq=3,
        items=[models.AppendedItem(seq=i.seq, type=i.type, tokens=i.tokens) for i in logged],
        excluded=[],
        timeline=postgres_timeline,
    )
    assert ctx.list_items(session_id, after_seq=1, limit=1) == models.ItemsPageResponse(
        items=logged[1:2], next_after_seq=2
    )
    assert list(ctx.iter_items(session_id, after_seq=3)) == []

    session = ctx.get_session(session_id)
    assert session == models.SessionDetailResponse(
        **created.model_dump(exclude={"last_seq"}),
        last_seq=3,
        item_count=3,
        active_tokens=session.active_tokens,
        provider_tokens_estimate=session.active_tokens,
        goal=None,
        world_state_version=0,
        compactions=0,
    )
    assert session.active_tokens >= sum(i.tokens for i in logged)


def test_goal_world_state_history_and_normalize(
    ctx: ContextdClient, raw: httpx.Client, session_id: str
) -> None:
    ctx.create_session(session_id=session_id)
    ctx.append_items(session_id, items=_turn(1))
    assert ctx.put_goal(session_id, text="ship the client") == models.GoalResponse(version=1, seq=5)
    state = ctx.put_world_state(
        session_id, sections={"rules": ["be brief"], "environment": {"cwd": "/repo"}}
    )
    assert state == models.WorldStateResponse(
        version=1,
        updates=state.updates,
        changes=[
            {"section": "environment", "change": "added"},
            {"section": "rules", "change": "added"},
        ],
        patch=None,
    )
    assert len(state.updates) == 2
    assert ctx.get_session(session_id).goal == {"version": 1, "text": "ship the client"}

    history = ctx.get_history(session_id, output_format="chat", input_modalities=["text"])
    query = {"output_format": "chat", "input_modalities": "text"}
    assert history == models.HistoryResponse.model_validate(
        _read(raw.get(f"/sessions/{session_id}/history", params=query))
    )
    assert [m["role"] for m in history.items][:2] == ["user", "assistant"]

    unanswered = [user_msg("run it"), tool_call("c9")]
    normalized = ctx.normalize(items=unanswered, truncation={"limit": 100})
    assert normalized == models.NormalizeResponse.model_validate(
        _read(
            raw.post("/history/normalize", json={"items": unanswered, "truncation": {"limit": 100}})
        )
    )
    assert [entry["call_id"] for entry in normalized.report.synthesized_outputs] == ["c9"]
    assert ctx.normalize(session_id=session_id) == models.NormalizeResponse.model_validate(
        _read(raw.post("/history/normalize", json={"session_id": session_id}))
    )


def test_recall_pages_a_fact_back_byte_for_byte_and_searches_the_log(
    ctx: ContextdClient, raw: httpx.Client, session_id: str
) -> None:
    ctx.create_session(session_id=session_id)
    turns = _turn(1) + _turn(2)
    ctx.append_items(session_id, items=turns)

    first = ctx.recall(session_id, seq=3, max_lines=150)
    assert first == models.RecallResponse.model_validate(
        _read(raw.post(f"/sessions/{session_id}/recall", json={"seq": 3, "max_lines": 150}))
    )
    windows = [first]
    while windows[-1].next_from_line is not None:
        windows.append(ctx.recall(session_id, seq=3, from_line=windows[-1].next_from_line))
    assert [(w.from_line, w.to_line, w.next_from_line) for w in windows] == [
        (1, 150, 151),
        (151, 201, None),
    ]
    assert "".join(w.text or "" for w in windows) == turns[2]["output"]
    assert windows[-1].tool_output.endswith(f"\n{windows[-1].text}")

    body: params.RecallRequest = {"from_seq": 1, "to_seq": 8, "pattern": r"^a\d\.py$"}
    found = ctx.recall(session_id, **body)
    assert found == models.RecallResponse.model_validate(
        _read(raw.post(f"/sessions/{session_id}/recall", json=body))
    )
    assert found.matches == [
        models.RecallMatchBody(seq=3, line=1, text="a1.py"),
        models.RecallMatchBody(seq=7, line=1, text="a2.py"),
    ]


def test_retraction_and_reset_change_the_active_history(
    ctx: ContextdClient, session_id: str
) -> None:
    ctx.create_session(session_id=session_id)
    turn = _turn(1)
    ctx.append_items(session_id, items=[*turn, user_msg("thanks")])
    assert ctx.retract(session_id, seq=3) == models.RetractionResponse(
        seq=6,
        retracted=[2, 3],
        items=[
            models.RetractedItem(seq=2, item=turn[1]),
            models.RetractedItem(seq=3, item=turn[2]),
        ],
    )
    assert ctx.get_history(session_id).items == [turn[0], turn[3], user_msg("thanks")]
    assert ctx.retract(session_id) == models.RetractionResponse(
        seq=7, retracted=[5], items=[models.RetractedItem(seq=5, item=user_msg("thanks"))]
    )
    assert ctx.reset(session_id) == models.ResetResponse(seq=8)
    assert ctx.get_history(session_id).items == []
    assert [entry.seq for entry in ctx.iter_items(session_id)] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_assemble_replay_usage_and_advice(
    ctx: ContextdClient, raw: httpx.Client, session_id: str
) -> None:
    ctx.create_session(session_id=session_id, model="claude-sonnet-4")
    ctx.append_items(session_id, items=_turn(1), unit="planner")
    assembly = ctx.assemble(session_id=session_id, unit="planner", sources=NOTES)
    assert [(i.id, i.source) for i in assembly.items if i.source == "notes"] == [("n1", "notes")]
    stored = ctx.get_assembly(assembly.assembly_id)
    assert stored == models.StoredAssemblyResponse(
        assembly_id=assembly.assembly_id,
        created_at=stored.created_at,
        session_id=session_id,
        request=stored.request,
        response=assembly,
    )

    replayed = ctx.replay_assembly(assembly.assembly_id, overrides={"drop_sources": ["notes"]})
    assert replayed.diff == models.AssemblyDiffBody(
        added=[],
        removed=["n1"],
        moved=replayed.diff.moved,
        tokens_delta=-next(i.tokens for i in assembly.items if i.id == "n1"),
    )
    assert replayed.assembly.assembly_id != assembly.assembly_id

    ctx.report_usage(
        session_id,
        input_tokens=assembly.total_tokens + 10,
        cached_tokens=0,
        output_tokens=7,
        assembly_id=assembly.assembly_id,
    )
    window = ctx.context_window(session_id)
    assert window == models.ContextWindowResponse.model_validate(
        _read(raw.get(f"/sessions/{session_id}/context-window"))
    )
    assert (window.tokenizer.family, window.tokenizer.calibrated, window.tokenizer.samples) == (
        "anthropic",
        True,
        1,
    )
    assert ctx.compaction_advice(session_id) == models.AdviceResponse.model_validate(
        _read(raw.get(f"/sessions/{session_id}/compaction-advice"))
    )
    # Priced by a lineage's cache: the planner's call came moments ago (its context is under
    # the minimum cacheable prefix, so nothing is cached); the session's own lineage has had no
    # call.
    priced = ctx.compaction_advice(session_id, unit="planner").cache
    assert priced is not None
    assert (priced.state, priced.ttl_seconds) == ("empty", 300)
    assert priced.idle_seconds is not None
    assert 0 <= priced.idle_seconds < 300
    assert ctx.compaction_advice(session_id).cache == models.AdviceCacheBody(
        state="empty",
        idle_seconds=None,
        ttl_seconds=300,
        horizon_calls=priced.horizon_calls,
        reduction_tokens=0,
        saving=0,
        cost=0,
        at_least_tokens=0,
    )


def test_evaluate(ctx: ContextdClient, raw: httpx.Client, session_id: str) -> None:
    ctx.create_session(session_id=session_id)
    ctx.append_items(session_id, items=[item for n in range(1, 6) for item in _turn(n)])
    never: params.EvaluateVariant = {"name": "never", "follow_advice": False}
    small: params.EvaluateVariant = {"name": "small", "keep_recent": 1}

    at_once = ctx.evaluate(session_id, variants=[never])  # 2 x 10 calls: answered at once
    # 3 x 10 calls, over the server's 25: a job, which the client follows to its result.
    followed = ctx.evaluate(session_id, variants=[never, small], poll_seconds=0.01)

    started = raw.post(f"/sessions/{session_id}/evaluate", json={"variants": [never, small]})
    assert started.status_code == 202
    job = ctx.get_evaluation(started.json()["evaluation_id"])
    assert job == models.EvaluationJobResponse.model_validate(
        _read(raw.get(started.headers["location"]))
    )
    assert (job.status, job.result) == ("done", followed)
    assert ctx.cancel_evaluation(job.evaluation_id) == job  # done: nothing to cancel
    assert at_once == models.EvaluateResponse.model_validate(
        _read(raw.post(f"/sessions/{session_id}/evaluate", json={"variants": [never]}))
    )
    assert [variant.name for variant in followed.variants] == ["current", "never", "small"]
    assert followed.variants[:2] == at_once.variants
    assert followed.variants[1].settings.follow_advice is False


def test_compact(ctx: ContextdClient, raw: httpx.Client, session_id: str) -> None:
    ctx.create_session(session_id=session_id)
    for n in range(1, 6):
        ctx.append_items(session_id, items=_turn(n))
    body: params.CompactRequest = {
        "session_id": session_id,
        "strategy": "clear_tool_results",
        "params": {"keep_recent": 1},
    }
    dry_run: params.CompactRequest = {**body, "dry_run": True}
    proposal = ctx.compact(**dry_run)
    assert proposal == models.CompactResponse.model_validate(
        _read(raw.post("/compact", json=dry_run))
    )
    assert (proposal.applied, proposal.not_applied_because, proposal.compaction_id) == (
        False,
        "dry_run",
        None,
    )

    compaction = ctx.compact(**body)
    assert compaction == models.CompactResponse(
        **proposal.model_dump(
            exclude={"compaction_id", "hooks", "dry_run", "applied", "not_applied_because"}
        ),
        compaction_id=compaction.compaction_id,
        hooks=[
            {"event": "pre_compact", "outcome": "not_configured", "detail": None, "reason": None}
        ],
        dry_run=False,
        applied=True,
        not_applied_because=None,
    )
    assert ctx.get_history(session_id).compaction_id == compaction.compaction_id

    stateless: params.CompactRequest = {
        "items": _turn(1) + _turn(2),
        "strategy": "truncate",
        "params": {"target_tokens": 60},
    }
    assert ctx.compact(**stateless) == models.CompactResponse.model_validate(
        _read(raw.post("/compact", json=stateless))
    )


def test_sub_agents_report_one_conclusion(ctx: ContextdClient, session_id: str) -> None:
    ctx.create_session(session_id=session_id)
    ctx.append_items(session_id, items=_turn(1), unit="planner")

    child = ctx.delegate(
        session_id, goal="find the bug", items=[user_msg("look at a.py")], unit="w"
    )
    assert child == models.ChildSessionResponse(
        session_id=child.session_id,
        parent_id=session_id,
        kind="delegate",
        inherit={},
        unit="w",
        fork_seq=None,
        last_seq=child.last_seq,
    )
    ended = ctx.end_session(child.session_id, conclusion=assistant_msg("found it in a.py"))
    parent_seq = ctx.get_session(session_id).last_seq
    assert ended == models.EndSessionResponse(
        compaction_id=ended.compaction_id,
        hooks=[
            {"event": "session_end", "outcome": "not_configured", "detail": None, "reason": None}
        ],
        conclusion_seq=parent_seq,
    )

    fork = ctx.fork(session_id, unit="explorer")
    assert fork == models.ChildSessionResponse(
        session_id=fork.session_id,
        parent_id=session_id,
        kind="fork",
        inherit={},
        unit="explorer",
        fork_seq=parent_seq,
        last_seq=fork.last_seq,
    )
    forked_at = ctx.get_session(session_id).last_seq  # the parent's log records the child
    merged = ctx.merge(fork.session_id, conclusion=assistant_msg("the fork agrees"))
    assert merged == models.ConclusionResponse(parent_id=session_id, seq=forked_at + 1)
    (conclusion,) = ctx.iter_items(session_id, after_seq=forked_at)
    assert (conclusion.item, conclusion.metadata["from_session"]) == (
        assistant_msg("the fork agrees"),
        fork.session_id,
    )


def test_manifests(ctx: ContextdClient, session_id: str) -> None:
    name = f"team rules #1 ü {session_id}"  # a name the path must escape
    version = ctx.put_manifest(
        name,
        entries=[{"id": "r1", "kind": "rule", "content": "Answer in one line."}],
        roles={"dev": {"include": ["r1"]}},
    )
    assert version == models.ManifestVersionResponse(name=name, version=1)
    assert ctx.get_manifest(name) == models.ManifestResponse(
        entries=[
            models.ManifestEntrySpec(
                id="r1",
                kind="rule",
                content="Answer in one line.",
                index=None,
                locator=None,
                links=[],
                environments=[],
            )
        ],
        roles={"dev": models.RoleViewSpec(include=["r1"], exclude=[])},
        priorities=[],
        name=name,
        version=1,
    )
    ctx.create_session(session_id=session_id)
    loaded = ctx.assemble(session_id=session_id, manifest=name, role="dev")
    assert loaded.items == [
        models.AssembledItem(
            id="manifest:0000:r1",
            source="manifest",
            layer="prefix",
            source_class="manifest",
            form="raw",
            position=0,
            tokens=loaded.startup_tokens,
            content="Answer in one line.",
            item=None,
        )
    ]
