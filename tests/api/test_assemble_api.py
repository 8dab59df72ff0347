"""`/assemble`, stored plans, replay, usage and cost metrics over HTTP, on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app.cli import render_plan
from app.domain.normalize import find_pairing_violations
from app.domain.packing import unpack_records
from app.main import create_app
from app.settings import Settings
from app.storage.tables import AssemblyRow
from tests.builders import assistant_msg, tool_call, tool_output, user_msg
from tests.conftest import TRAJECTORIES, load_trajectory


def doc(doc_id: str, text: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": doc_id,
        "content": text,
        "layer": "retrieval",
        "locator": f"file://{doc_id}",
        **fields,
    }


def _assemble(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/assemble", json=body)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def _all_reused(result: dict[str, Any]) -> dict[str, Any]:
    """The `cache` of a call that repeats its lineage's previous call exactly."""
    return {
        "reused_prefix_tokens": result["total_tokens"],
        "new_tokens": 0,
        "reused_prefix_items": len(result["items"]),
        "last_reused_item_id": result["items"][-1]["id"],
        "break": None,
    }


def _decisions(result: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(e["id"], e["decision"], e["reason"]) for e in result["plan"]]


def test_assemble_selects_under_budget_and_records_every_decision(client: TestClient) -> None:
    sources = [
        {"source": "retrieval", "items": [doc("old", "stale text", relevance=0.9)]},
        {
            "source": "retrieval",
            "items": [
                doc("a", "alpha " * 50, relevance=0.9),
                doc("b", "beta " * 50, relevance=0.8),
                doc("c", "gamma " * 50, relevance=0.1),
                {
                    "id": "nolocator",
                    "content": "who said this",
                    "layer": "retrieval",
                    "relevance": 1.0,
                },
            ],
        },
        {
            "source": "rules",
            "items": [
                {"id": "rules", "content": "be careful", "layer": "prefix", "required": True}
            ],
        },
    ]
    result = _assemble(
        client, sources=sources, budget={"max_tokens": 120, "max_items": 5}, min_relevance=0.2
    )
    assert _decisions(result) == [
        ("old", "dropped", "superseded_contribution"),
        ("a", "selected", None),
        ("b", "selected", None),
        ("c", "dropped", "below_relevance"),
        ("nolocator", "dropped", "unattributed"),
        ("rules", "selected", None),
    ]
    assert [(i["id"], i["position"], i["layer"]) for i in result["items"]] == [
        ("rules", 0, "prefix"),
        ("a", 1, "retrieval"),
        ("b", 2, "retrieval"),
    ]
    # Issue 46: nothing here was left out for the budget (the drops are a superseded
    # contribution, an irrelevant candidate and an unattributed one): not truncated.
    assert result["truncated"] is False
    assert result["over_budget"] is False
    assert result["total_tokens"] == sum(i["tokens"] for i in result["items"])
    tokens = {i["id"]: i["tokens"] for i in result["items"]}
    assert result["by_source_class"] == {"retrieval": tokens["a"] + tokens["b"], "rules": 2}
    stored = client.get(f"/assemblies/{result['assembly_id']}").json()
    assert stored["response"] == result
    assert stored["request"]["sources"] == sources


def test_same_request_gives_same_plan_hash_and_a_new_assembly_id(client: TestClient) -> None:
    body = {"sources": [{"source": "s", "items": [doc("x", "some text", relevance=0.5)]}]}
    first, second = _assemble(client, **body), _assemble(client, **body)
    assert first["plan_hash"] == second["plan_hash"]
    assert first["assembly_id"] != second["assembly_id"]
    assert {k: v for k, v in first.items() if k not in ("assembly_id", "cache")} == {
        k: v for k, v in second.items() if k not in ("assembly_id", "cache")
    }


def test_required_items_are_kept_beyond_the_budget_and_say_so(client: TestClient) -> None:
    body = {
        "sources": [
            {
                "source": "rules",
                "items": [
                    {"id": "r", "content": "rule " * 100, "required": True, "layer": "prefix"}
                ],
            },
            {"source": "retrieval", "items": [doc("d", "small doc", relevance=1.0)]},
        ],
        "budget": {"max_tokens": 10},
    }
    result = _assemble(client, **body)
    assert _decisions(result) == [("r", "selected", None), ("d", "dropped", "max_tokens")]
    assert result["over_budget"] is True


def test_item_degrades_to_a_cheaper_form_before_it_is_dropped(client: TestClient) -> None:
    big = doc(
        "f",
        "line of code\n" * 200,
        relevance=0.9,
        forms={"skeleton": "def f(): ...", "reference": "file://f"},
    )
    result = _assemble(
        client, sources=[{"source": "files", "items": [big]}], budget={"max_tokens": 20}
    )
    assert [(e["id"], e["decision"], e["form"]) for e in result["plan"]] == [
        ("f", "selected", "skeleton")
    ]
    assert result["items"][0]["content"] == "def f(): ..."


def test_session_mode_keeps_newest_turns_without_splitting_calls(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id})
    items = load_trajectory(TRAJECTORIES[3])
    client.post(f"/sessions/{session_id}/items", json={"items": items})
    result = _assemble(client, session_id=session_id, budget={"max_tokens": 3000}, unit="worker")
    history = [i["item"] for i in result["items"] if i["source"] == "history"]
    assert history
    assert find_pairing_violations(history) == []
    assert history[-1] == items[-1]
    assert result["total_tokens"] <= 3000
    # What it left out (the system message, the older turns) is named before the history.
    assert result["messages"][-len(history) :] == history
    notice = result["items"][0]
    assert (notice["source"], notice["layer"]) == ("elision", "prefix")
    assert [(e["first_seq"], e["form"]) for e in result["elided"]] == [
        (1, "excluded"),
        (2, "dropped"),
    ]
    assert "fact seq 1 (excluded" in notice["content"]
    assert f"fact seqs 2–{result['elided'][1]['last_seq']} (dropped" in notice["content"]
    again = _assemble(client, session_id=session_id, budget={"max_tokens": 3000}, unit="worker")
    assert again["cache"] == _all_reused(again)


def test_session_mode_default_budget_is_the_usable_window(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id, "context_window": 50_000})
    client.post(
        f"/sessions/{session_id}/items", json={"items": [user_msg("hi"), assistant_msg("hello")]}
    )
    result = _assemble(client, session_id=session_id)
    assert result["budget"]["max_tokens"] == 50_000 - 16_000
    assert [i["item"] for i in result["items"]] == [user_msg("hi"), assistant_msg("hello")]


def test_chat_output_format_converts_the_selected_history(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id})
    client.post(
        f"/sessions/{session_id}/items",
        json={"items": [user_msg("ls"), tool_call("c1", "sh"), tool_output("c1", "a.py")]},
    )
    result = _assemble(client, session_id=session_id, output_format="chat")
    assert result["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "ls"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]


def test_replay_with_a_smaller_budget_reports_the_difference(client: TestClient) -> None:
    sources = [
        {
            "source": "r",
            "items": [doc(f"d{n}", f"document {n} " * 10, relevance=1 - n / 10) for n in range(5)],
        }
    ]
    original = _assemble(client, sources=sources, placement="input_order")
    replay = client.post(
        f"/assemblies/{original['assembly_id']}/replay",
        json={"overrides": {"budget": {"max_items": 2}}},
    )
    assert replay.status_code == 201, replay.text
    body = replay.json()
    assert body["diff"] == {
        "added": [],
        "removed": ["d2", "d3", "d4"],
        "moved": [],
        "tokens_delta": body["assembly"]["total_tokens"] - original["total_tokens"],
        # The replay's prefix ends where the original's third document was.
        "prefix_break": {
            "position": 2,
            "item_id": None,
            "seq": None,
            "cause": "override",
            "detail": "the request's own budget, placement or settings differ from the last",
        },
    }
    assert body["diff"]["tokens_delta"] < 0
    dropped = client.post(
        f"/assemblies/{original['assembly_id']}/replay", json={"overrides": {"drop_sources": ["r"]}}
    ).json()
    assert dropped["diff"]["removed"] == ["d0", "d1", "d2", "d3", "d4"]


def test_plans_are_invisible_to_other_tenants(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, api_keys=["t1:key-one", "t2:key-two"])
    with TestClient(create_app(settings)) as service:
        one = {"Authorization": "Bearer key-one"}
        two = {"Authorization": "Bearer key-two"}
        made = service.post("/assemble", json={"sources": []}, headers=one).json()
        path = f"/assemblies/{made['assembly_id']}"
        assert service.get(path, headers=one).status_code == 200
        assert service.get(path, headers=two).status_code == 404
        assert service.post(f"{path}/replay", json={}, headers=two).status_code == 404


def test_bad_assemble_input_is_a_clear_4xx(client: TestClient) -> None:
    nan_body = (
        '{"sources": [{"source": "s", "items": [{"id": "a", "content": "x", "relevance": NaN}]}]}'
    )
    cases = [
        client.post("/assemble", content=nan_body, headers={"content-type": "application/json"}),
        client.post(
            "/assemble",
            json={"sources": [{"source": "s", "items": [doc("a", "x"), doc("a", "y")]}]},
        ),
        client.post(
            "/assemble",
            json={"sources": [{"source": "s", "items": [doc("a", "x", relevance=1.5)]}]},
        ),
        client.post("/assemble", json={"policy": "generous"}),
        client.post(
            "/assemble",
            json={"sources": [{"source": "s", "items": [doc("a", "x", layer="basement")]}]},
        ),
        client.post("/assemble", json={"sources": [{"source": "s", "items": [{"id": "a"}]}]}),
        client.post("/assemble", json={"session_id": "no-such-session"}),
    ]
    assert [c.status_code for c in cases] == [422, 422, 422, 422, 422, 422, 404]
    assert all("error" in c.json() for c in cases)


def test_zero_budget_and_ten_thousand_candidates_give_correct_plans(client: TestClient) -> None:
    zero = _assemble(
        client,
        sources=[{"source": "s", "items": [doc("a", "x", relevance=1)]}],
        budget={"max_tokens": 0},
    )
    assert _decisions(zero) == [("a", "dropped", "max_tokens")]
    many = [doc(f"d{n}", f"text {n}", relevance=(n % 100) / 100, tokens=2) for n in range(10_000)]
    result = _assemble(client, sources=[{"source": "s", "items": many}])
    assert len(result["plan"]) == 10_000
    # The balanced preset allows 6 items per source.
    assert len(result["items"]) == 6


def test_costs_are_exported_on_three_axes_with_exemplars(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id})
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("hello there")]})
    made = _assemble(client, session_id=session_id, unit="planner", phase="explore")
    usage = client.post(
        f"/sessions/{session_id}/usage",
        json={
            "input_tokens": 100,
            "cached_tokens": 60,
            "output_tokens": 7,
            "unit": "planner",
            "phase": "explore",
        },
    )
    assert usage.status_code == 204
    text = client.get("/metrics").text
    assert (
        'contextd_context_tokens_total{cache="new",phase="explore",source_class="history",unit="planner"}'
        in text
    )
    assert 'contextd_provider_tokens_total{kind="cached",phase="explore",unit="planner"} ' in text
    openmetrics = client.get("/metrics", headers={"accept": "application/openmetrics-text"}).text
    assert f'assembly_id="{made["assembly_id"]}"' in openmetrics


def test_plan_renders_as_a_table_for_humans(client: TestClient) -> None:
    made = _assemble(
        client,
        sources=[{"source": "s", "items": [doc("a", "x", relevance=1), doc("b", "y")]}],
        budget={"max_items": 1},
    )
    table = render_plan(client.get(f"/assemblies/{made['assembly_id']}").json())
    lines = table.splitlines()
    assert lines[0].startswith(f"assembly {made['assembly_id']}")
    assert lines[4].split()[:2] == ["0", "selected"]
    assert lines[4].split()[-1] == "a"
    assert lines[5].split()[:3] == ["-", "dropped", "max_items"]
    assert lines[5].split()[-1] == "b"
    # The tenant's stateless calls are one lineage: an earlier test's may have left a break.
    assert [line for line in lines[6:] if not line.startswith("prefix break  ")] == []


def test_plan_table_says_where_the_cache_breakpoints_are(client: TestClient) -> None:
    client.post("/sessions", json={"session_id": "plan-breakpoints"})
    client.put("/sessions/plan-breakpoints/goal", json={"text": "Ship it."})
    client.post("/sessions/plan-breakpoints/items", json={"items": [user_msg("go")]})
    made = _assemble(client, session_id="plan-breakpoints", output_format="anthropic")
    table = render_plan(client.get(f"/assemblies/{made['assembly_id']}").json())
    assert table.splitlines()[-2:] == [
        "cache breakpoint  stable_prefix  after pos 0 (goal) on system block 0",
        "cache breakpoint  history_end    after pos 1 (history:0) on messages[0] block 0",
    ]


def test_a_plan_that_cannot_be_stored_after_its_answer_is_counted_not_raised(
    postgres_url: str,
) -> None:
    from prometheus_client import REGISTRY
    from sqlalchemy.orm import sessionmaker

    from app.metrics import record_plan_store
    from app.storage import plans
    from app.storage.database import create_db_engine

    unreachable = create_db_engine(
        Settings(database_url="postgresql+psycopg://postgres@127.0.0.1:1/x", db_timeout_seconds=1)
    )
    record = plans.NewAssembly(
        tenant_id=1,
        session_pk=None,
        as_of_seq=None,
        unit=None,
        phase=None,
        plan_hash="0" * 64,
        request="{}",
        response={},
        fingerprints=[],
    )

    def failures() -> float:
        return REGISTRY.get_sample_value("contextd_plan_store_failures_total") or 0.0

    before = failures()
    stored = plans.store_after_answer(
        sessionmaker(unreachable)(), lambda: record, row_id=1, derive=str
    )
    record_plan_store(stored)  # as the use case does after the answer
    assert stored is None
    assert failures() == before + 1


def test_bodies_that_are_not_json_or_not_unicode_are_refused_with_the_reason(
    client: TestClient, session_id: str
) -> None:
    json_type = {"content-type": "application/json"}
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    truncated = client.post("/assemble", content=b'{"sources": [', headers=json_type)
    lone = client.post(
        f"/sessions/{session_id}/items",
        content=b'{"items": [{"type": "message", "role": "user", "content": "\\ud800"}]}',
        headers=json_type,
    )
    assert (truncated.status_code, truncated.json()["error"]["code"]) == (400, "malformed_json")
    assert truncated.json()["error"]["details"] == [{"loc": ["body", 13], "msg": "Expecting value"}]
    assert lone.status_code == 400
    assert lone.json()["error"] == {
        "code": "malformed_json",
        "message": "the request body is not valid JSON",
        "details": [
            {"loc": ["body", 0], "msg": "text contains a lone UTF-16 surrogate; send valid Unicode"}
        ],
    }
    assert client.get(f"/sessions/{session_id}").json()["last_seq"] == 0
    # The standard library's extensions still reach validation: NaN is a clear 422.
    nan = client.post("/assemble", content=b'{"min_relevance": NaN}', headers=json_type)
    assert nan.status_code == 422


def test_a_request_is_stored_as_received_in_utf_8_and_as_its_value_in_utf_16(
    client: TestClient,
) -> None:
    """A small request is stored as its text, decoded after the answer: UTF-8 byte for byte
    (escapes and key order as sent); a UTF-16 body, which JSON allows, as its value."""
    sent = (
        '{"sources":[{"source":"docs",'
        '"items":[{"id":"a","content":"caf\u00e9 \\u00e9","locator":"x:a"}]}]}'
    )
    as_utf8 = client.post(
        "/assemble", content=sent.encode(), headers={"content-type": "application/json"}
    )
    as_utf16 = client.post(
        "/assemble", content=sent.encode("utf-16"), headers={"content-type": "application/json"}
    )
    assert (as_utf8.status_code, as_utf16.status_code) == (201, 201), as_utf16.text
    assert as_utf8.json()["plan_hash"] == as_utf16.json()["plan_hash"]
    for answer in (as_utf8, as_utf16):
        stored = client.get(f"/assemblies/{answer.json()['assembly_id']}")
        assert stored.status_code == 200, stored.text
        assert stored.json()["request"] == json.loads(sent)
    ids = [as_utf8.json()["assembly_id"], as_utf16.json()["assembly_id"]]
    with client.app.state.session_factory() as db:  # type: ignore[attr-defined]
        kept = db.execute(
            select(AssemblyRow.external_id, AssemblyRow.request).where(
                AssemblyRow.external_id.in_(ids)
            )
        ).all()
    as_value = json.dumps(json.loads(sent), separators=(",", ":"), ensure_ascii=False)
    assert dict(kept) == {ids[0]: sent, ids[1]: as_value}


def test_plans_on_both_engines_are_stored_fetched_replayed_and_chained(
    database_url: str, session_id: str
) -> None:
    """The zero-setup default (SQLite, stored before answering) and PostgreSQL (after) agree."""
    sources = [{"source": "docs", "items": [doc("a", "alpha " * 30, relevance=0.9)]}]
    with TestClient(create_app(Settings(database_url=database_url))) as service:
        service.post("/sessions", json={"session_id": session_id}).raise_for_status()
        made = []
        for text in ("first", "second"):
            appended = service.post(
                f"/sessions/{session_id}/items", json={"items": [user_msg(text)]}
            )
            assert appended.status_code == 201, appended.text
            answer = service.post("/assemble", json={"session_id": session_id, "sources": sources})
            assert answer.status_code == 201, answer.text
            made.append(answer.json())
        stored = service.get(f"/assemblies/{made[1]['assembly_id']}")
        replayed = service.post(
            f"/assemblies/{made[1]['assembly_id']}/replay",
            json={"overrides": {"drop_sources": ["docs"]}},
        )
    assert stored.status_code == 200
    assert stored.json()["response"] == made[1]
    assert replayed.status_code == 201, replayed.text
    assert replayed.json()["diff"]["removed"] == ["a"]
    # The second call's leading item (the first turn) repeats the first's; the document, after
    # the history, comes after the new turn.
    first, second = made
    assert [i["id"] for i in second["items"]] == ["history:0", "history:1", "a"]
    assert second["cache"]["reused_prefix_tokens"] == first["items"][0]["tokens"]


def test_prefix_reuse_is_measured_per_session_and_unit(client: TestClient, session_id: str) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("hi")]})
    docs = [{"source": "docs", "items": [doc("a", "alpha " * 20, relevance=0.9)]}]
    other = [{"source": "docs", "items": [doc("b", "beta " * 20, relevance=0.9)]}]
    first = _assemble(client, session_id=session_id, sources=docs, unit="planner")
    worker = _assemble(client, session_id=session_id, sources=other, unit="worker")
    again = _assemble(client, session_id=session_id, sources=docs, unit="planner")
    assert first["cache"]["reused_prefix_tokens"] == 0
    assert worker["cache"]["reused_prefix_tokens"] == 0  # a unit's first call: nothing before it
    # Measured against the planner's previous call, not the worker's call in between.
    assert again["cache"] == _all_reused(again)
    # A child session that names no unit in the call chains under its own unit.
    child = client.post(
        f"/sessions/{session_id}/delegate", json={"goal": "g", "unit": f"{session_id[:20]}-kid"}
    ).json()
    one = _assemble(client, session_id=child["session_id"], sources=docs)
    two = _assemble(client, session_id=child["session_id"], sources=docs)
    assert one["unit"] == f"{session_id[:20]}-kid"
    assert one["cache"]["reused_prefix_tokens"] == 0
    assert two["cache"] == _all_reused(two)


def test_token_estimates_are_checked_in_the_session_encoding(
    client: TestClient, session_id: str
) -> None:
    from prometheus_client import REGISTRY

    from app.tokens import token_counter

    text = "Привет, как дела? Это проверка токенизатора для разных кодировок."
    exact = token_counter("cl100k_base")(text)
    assert exact != token_counter("o200k_base")(text)  # the encodings disagree on this text
    client.post("/sessions", json={"session_id": session_id, "encoding": "cl100k_base"})

    def observed() -> tuple[float, float]:
        name = "contextd_token_estimate_error_ratio"
        return (
            REGISTRY.get_sample_value(f"{name}_count") or 0.0,
            REGISTRY.get_sample_value(f"{name}_sum") or 0.0,
        )

    before = observed()
    _assemble(
        client,
        session_id=session_id,
        sources=[{"source": "docs", "items": [doc("ru", text, tokens=exact, relevance=0.9)]}],
    )
    after = observed()
    # One estimate checked, and it was exact in the session's encoding.
    assert (after[0] - before[0], after[1] - before[1]) == (1.0, 0.0)


def test_session_history_tokens_are_the_counts_of_what_the_model_sees(
    client: TestClient, session_id: str
) -> None:
    from app.domain.items import visible_text
    from app.tokens import token_counter

    client.post("/sessions", json={"session_id": session_id})
    text = "Привет, как дела? Это проверка токенизатора для разных кодировок."
    # The long output is cut by normalization: its count is of the cut text, not the stored one.
    items = [user_msg(text), tool_call("c1", "sh"), tool_output("c1", "word " * 20_000)]
    client.post(f"/sessions/{session_id}/items", json={"items": items})
    client.post(f"/sessions/{session_id}/items", json={"items": [assistant_msg(text)]})

    for encoding in ("o200k_base", "cl100k_base"):
        result = _assemble(client, session_id=session_id, encoding=encoding)
        count = token_counter(encoding)
        history = [i for i in result["items"] if i["layer"] == "recent"]
        assert [i["item"]["type"] for i in history] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
        ]
        assert history[2]["item"] != items[2]  # truncated
        assert [i["tokens"] for i in history] == [count(visible_text(i["item"])) for i in history]


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Counter samples by (series name, sorted labels)."""
COST_FAMILIES = (
    "contextd_cache_predicted_tokens",
    "contextd_cache_actual_tokens",
    "contextd_provider_tokens",
)


def _cost_samples(client: TestClient) -> Samples:
    """Every sample of the prediction and provider-usage counters, read from /metrics."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        if family.name in COST_FAMILIES
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def _moved(before: Samples, after: Samples) -> Samples:
    return {
        key: value - before.get(key, 0.0)
        for key, value in after.items()
        if value != before.get(key, 0.0)
    }


def test_a_repeated_call_states_where_its_reused_prefix_ends(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("first turn")]})
    docs = [{"source": "docs", "items": [doc("a", "alpha " * 20, layer="prefix")]}]
    first = _assemble(client, session_id=session_id, sources=docs)
    client.post(f"/sessions/{session_id}/items", json={"items": [assistant_msg("an answer")]})
    second = _assemble(client, session_id=session_id, sources=docs)
    # The prefix document and the first turn repeat; the answer appended since is the first
    # new item.
    assert [i["id"] for i in first["items"]] == [i["id"] for i in second["items"][:2]]
    reused = sum(item["tokens"] for item in first["items"])
    assert first["cache"] == {
        "reused_prefix_tokens": 0,
        "new_tokens": first["total_tokens"],
        "reused_prefix_items": 0,
        "last_reused_item_id": None,
        "break": None,
    }
    assert second["cache"] == {
        "reused_prefix_tokens": reused,
        "new_tokens": second["total_tokens"] - reused,
        "reused_prefix_items": 2,
        "last_reused_item_id": first["items"][1]["id"],
        "break": None,
    }
    assert second["items"][2]["item"] == assistant_msg("an answer")


def test_usage_for_an_assembly_counts_predicted_against_actual_cached_tokens(
    client: TestClient, session_id: str
) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("first turn " * 10)]})
    labels = {"unit": "cost-check", "phase": "verify"}
    _assemble(client, session_id=session_id, **labels)
    client.post(f"/sessions/{session_id}/items", json={"items": [assistant_msg("an answer")]})
    made = _assemble(client, session_id=session_id, **labels)
    predicted = made["cache"]["reused_prefix_tokens"]
    assert predicted > 0
    before = _cost_samples(client)
    # No unit or phase in the report: the assembly's are used.
    usage = client.post(
        f"/sessions/{session_id}/usage",
        json={
            "input_tokens": made["total_tokens"],
            "cached_tokens": predicted - 3,
            "output_tokens": 5,
            "assembly_id": made["assembly_id"],
        },
    )
    assert (usage.status_code, usage.content) == (204, b"")
    series = (("phase", "verify"), ("unit", "cost-check"))
    assert _moved(before, _cost_samples(client)) == {
        ("contextd_cache_predicted_tokens_total", series): predicted,
        ("contextd_cache_actual_tokens_total", series): predicted - 3,
        ("contextd_provider_tokens_total", (("kind", "cached"), *series)): predicted - 3,
        ("contextd_provider_tokens_total", (("kind", "output"), *series)): 5,
        ("contextd_provider_tokens_total", (("kind", "uncached"), *series)): (
            made["total_tokens"] - predicted + 3
        ),
    }


def test_usage_naming_an_unknown_or_foreign_assembly_is_refused_and_records_nothing(
    client: TestClient, session_id: str
) -> None:
    other = f"{session_id}-other"
    for name in (session_id, other):
        client.post("/sessions", json={"session_id": name}).raise_for_status()
        client.post(f"/sessions/{name}/items", json={"items": [user_msg("hi")]})
    of_other = _assemble(client, session_id=other)["assembly_id"]
    stateless = _assemble(client, sources=[])["assembly_id"]
    path = f"/sessions/{session_id}/usage"
    before = _cost_samples(client)
    unknown = client.post(path, json={"cached_tokens": 10, "assembly_id": "asm_missing"})
    foreign = [
        client.post(path, json={"cached_tokens": 10, "assembly_id": assembly_id})
        for assembly_id in (of_other, stateless)
    ]
    bad = [
        client.post(path, json={"cached_tokens": -1, "assembly_id": of_other}),
        client.post(path, json={"cached_tokens": 1, "assembly_id": "a" * 65}),
        client.post(path, json={"cached_tokens": "many"}),
        client.post(path, json={"cached_tokens": 1, "assembly": of_other}),
    ]
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "not_found")
    assert [r.status_code for r in foreign] == [409, 409]
    assert foreign[0].json()["error"] == {
        "code": "assembly_of_another_session",
        "message": f"assembly {of_other!r} was not assembled for session {session_id!r}",
        "details": [{"loc": ["body", "assembly_id"], "msg": "assembly of another session"}],
    }
    assert [r.status_code for r in bad] == [422, 422, 422, 422]
    assert _moved(before, _cost_samples(client)) == {}


def test_usage_cannot_name_another_tenants_assembly(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, api_keys=["t1:key-one", "t2:key-two"])
    with TestClient(create_app(settings)) as service:
        one = {"Authorization": "Bearer key-one"}
        two = {"Authorization": "Bearer key-two"}
        service.post("/sessions", json={"session_id": session_id}, headers=one).raise_for_status()
        service.post("/sessions", json={"session_id": session_id}, headers=two).raise_for_status()
        made = service.post("/assemble", json={"session_id": session_id}, headers=one).json()
        usage = service.post(
            f"/sessions/{session_id}/usage",
            json={"cached_tokens": 1, "assembly_id": made["assembly_id"]},
            headers=two,
        )
    assert usage.status_code == 404


def test_a_newcomers_plain_items_are_kept(client: TestClient) -> None:
    # No layer, no locator: the first /assemble anyone tries must show what they sent.
    plain = [{"id": "a", "content": "def f(): pass"}, {"id": "b", "content": "def g(): pass"}]
    result = _assemble(client, sources=[{"source": "notes", "items": plain}])
    assert _decisions(result) == [("a", "selected", None), ("b", "selected", None)]
    assert [item["layer"] for item in result["items"]] == ["memory", "memory"]


@pytest.mark.parametrize("output_format", ["responses", "chat", "anthropic"])
def test_a_stored_plan_reads_back_its_rendering_byte_for_byte(
    client: TestClient, session_id: str, output_format: str
) -> None:
    """A plan is stored without its rendering (`messages`, `system`, `conversion`), which is
    derived again on read: what is read back is what was sent, key order included, in every
    format, with the cache breakpoints where the plan put them (a client's own kept too)."""
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    sent = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix the parser.", "cache_control": {"type": "ephemeral"}}
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Read it first.", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "shell", "input": {"cmd": "cat p.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "def parse(): ..."}
            ],
        },
    ]
    client.post(
        f"/sessions/{session_id}/items", json={"items": sent, "format": "anthropic"}
    ).raise_for_status()
    client.put(f"/sessions/{session_id}/goal", json={"text": "Make test_parse pass."})
    answers = []
    for _ in range(2):  # the second call reuses the first's prefix: one more breakpoint
        made = client.post(
            "/assemble",
            json={
                "session_id": session_id,
                "output_format": output_format,
                "sources": [{"source": "files", "items": [{"id": "p.py", "content": "x = 1"}]}],
            },
        )
        assert made.status_code == 201
        answers.append(made.content)
    for answer in answers:
        made_json = json.loads(answer)
        stored = client.get(f"/assemblies/{made_json['assembly_id']}")
        assert json.dumps(stored.json()["response"]) == json.dumps(made_json)
    assert json.loads(answers[1])["cache_breakpoints"] or output_format != "anthropic"


def test_a_plan_stores_its_history_by_reference_and_derives_it_from_the_log(
    client: TestClient, postgres_url: str, session_id: str
) -> None:
    """A session-mode plan stores the history items it shows as they are by reference only (the
    log holds them); read back, from this process's memory or from the log alone (after a
    compaction changed what the session shows now), it is the answer as sent. A plan the log no
    longer yields (here: a tampered fingerprint) is a 409, not a silent change."""
    import psycopg

    from tests.conftest import _admin_conninfo

    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    turn = [user_msg("Why does test_parse fail?")]
    for call in ("c1", "c2", "c3", "c4"):
        turn += [tool_call(call), tool_output(call, f"output of {call}\n" * 200)]
    client.post(f"/sessions/{session_id}/items", json={"items": turn}).raise_for_status()
    made = client.post("/assemble", json={"session_id": session_id})
    assert made.status_code == 201
    answer = made.json()
    compacted = client.post(
        "/compact", json={"session_id": session_id, "strategy": "clear_tool_results"}
    )
    assert compacted.json()["applied"]
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        stored_items = db.execute(
            "SELECT response->'items' FROM assemblies WHERE external_id = %s",
            (answer["assembly_id"],),
        ).fetchone()
    assert stored_items is not None
    assert [("item" in item, item["source"]) for item in unpack_records(stored_items[0])] == [
        (False, "history") for _ in answer["items"]
    ]
    path = f"/assemblies/{answer['assembly_id']}"
    from_memory = client.get(path).json()["response"]
    caches = client.app.state.caches  # type: ignore[attr-defined]
    with caches.shown_lock:
        caches.shown.clear()
    from_log = client.get(path).json()["response"]
    assert json.dumps(from_memory) == json.dumps(answer)
    assert json.dumps(from_log) == json.dumps(answer)
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        db.execute(
            "UPDATE assemblies SET plan_hash = %s, fingerprints = jsonb_set("
            "fingerprints::jsonb, '{0,0}', '\"0\"')::json WHERE external_id = %s",
            ("0" * 64, answer["assembly_id"]),
        )
    refused = client.get(path)
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "stored_plan_mismatch")
    assert refused.json()["error"]["details"] == {"positions": [0]}


def test_a_plan_stores_the_candidates_it_selected_by_reference_to_its_request(
    client: TestClient, postgres_url: str
) -> None:
    """A selected candidate, as the request gave it, is stored once: in the request, which the
    plan keeps, and named from the answer's items by source and id. Read back, the answer is
    what was sent; a candidate the core reduced is stored with its body."""
    import psycopg

    from tests.conftest import _admin_conninfo

    files = [
        {"id": "a.py", "content": "def a():\n    return 1\n"},
        {"id": "b.md", "item": user_msg("notes on b")},
    ]
    made = client.post("/assemble", json={"sources": [{"source": "files", "items": files}]})
    assert made.status_code == 201
    answer = made.json()
    with psycopg.connect(_admin_conninfo(postgres_url)) as db:
        row = db.execute(
            "SELECT response->'items' FROM assemblies WHERE external_id = %s",
            (answer["assembly_id"],),
        ).fetchone()
    assert row is not None
    assert [("content" in item, "item" in item) for item in unpack_records(row[0])] == [
        (False, False)
    ] * 2
    stored = client.get(f"/assemblies/{answer['assembly_id']}").json()["response"]
    assert json.dumps(stored) == json.dumps(answer)
