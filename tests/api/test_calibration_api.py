"""Budgets in the provider's tokens over HTTP, on PostgreSQL: a session's tokenizer family from
its model, the conservative default ratio, the affine calibration (an overhead and a ratio)
from usage reports naming their assembly, and the windows, estimates and pressure that follow
it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, update

from app.storage.tables import SessionRow
from tests.builders import tool_call, tool_output, user_msg

# 20,000 tokens of window less the default 16,000 reserve, capped at half the window.
CONTEXT_WINDOW = 20_000
USABLE = 10_000
CLAUDE_DEFAULT = {
    "family": "anthropic",
    "ratio": 1.35,
    "overhead_tokens": 0,
    "calibrated": False,
    "samples": 0,
    "exact": False,
}
EXACT = {
    "family": "openai",
    "ratio": 1.0,
    "overhead_tokens": 0,
    "calibrated": False,
    "samples": 0,
    "exact": True,
}
# A large model's window, 200,000 tokens less the 16,000 reserve: room for 15,000 of tools.
LARGE_WINDOW = 200_000
LARGE_USABLE = 184_000
TOOLS = 15_000


def _session(client: TestClient, session_id: str, model: str, **options: Any) -> dict[str, Any]:
    # Without the recall tool, whose definition would be one more pinned source class.
    body = {
        "session_id": session_id,
        "context_window": CONTEXT_WINDOW,
        "model": model,
        "recall_tool": False,
        **options,
    }
    created = client.post("/sessions", json=body)
    assert created.status_code == 201, created.text
    answer: dict[str, Any] = created.json()
    return answer


def _turn(number: int, words: int) -> list[dict[str, Any]]:
    """One model call and its result: a shell command and an output of about `words` tokens."""
    call_id = f"call-{number}"
    output = " ".join(f"w{number}x{k}" for k in range(words // 3))
    return [
        tool_call(call_id, "bash", json.dumps({"command": f"make step{number}"})),
        tool_output(call_id, output),
    ]


def _append(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _get(client: TestClient, path: str) -> dict[str, Any]:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _assemble(client: TestClient, session_id: str, **request: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, **request})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _report(
    client: TestClient,
    session_id: str,
    assembly: dict[str, Any],
    ratio: float,
    *,
    overhead: int = 0,
) -> int:
    """The provider's usage of `assembly`, `overhead` plus `ratio` times its exact tokens; the
    input tokens reported."""
    input_tokens: int = overhead + round(assembly["total_tokens"] * ratio)
    usage = client.post(
        f"/sessions/{session_id}/usage",
        json={
            "assembly_id": assembly["assembly_id"],
            "input_tokens": input_tokens,
            "output_tokens": 50,
        },
    )
    assert usage.status_code == 204, usage.text
    return input_tokens


def _window(ratio: float, overhead: int = 0, *, usable: int = USABLE) -> int:
    return math.floor(round((usable - overhead) / ratio, 6))


def _estimate(tokens: int, ratio: float, overhead: int = 0) -> int:
    return math.ceil(round(overhead + tokens * ratio, 6))


def _tokenizer(client: TestClient, session_id: str) -> dict[str, Any]:
    tokenizer: dict[str, Any] = _get(client, f"/sessions/{session_id}")["tokenizer"]
    return tokenizer


def _calibration_counts(
    client: TestClient, metric: str = "contextd_calibration_observed_ratio"
) -> dict[str, float]:
    return {
        sample.labels["family"]: sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        if family.name == metric
        for sample in family.samples
        if sample.name.endswith("_count")
    }


def test_an_uncalibrated_claude_session_budgets_at_the_default_ratio(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "claude-sonnet-4-5")
    assert (created["usable_window"], created["tokenizer"]) == (USABLE, CLAUDE_DEFAULT)
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600), *_turn(2, 600)])

    detail = _get(client, f"/sessions/{session_id}")
    assembled = _assemble(client, session_id)
    advice = _get(client, f"/sessions/{session_id}/compaction-advice")
    window = _get(client, f"/sessions/{session_id}/context-window")

    active = detail["active_tokens"]
    # No goal or world state: the active context is the history, and assembly fits all of it.
    assert assembled["total_tokens"] == active
    assert (detail["provider_tokens_estimate"], detail["tokenizer"]) == (
        _estimate(active, 1.35),
        CLAUDE_DEFAULT,
    )
    assert {
        key: assembled[key]
        for key in ("provider_tokens_estimate", "encoding", "tokenizer", "budget")
    } == {
        "provider_tokens_estimate": _estimate(active, 1.35),
        "encoding": "o200k_base",
        "tokenizer": CLAUDE_DEFAULT,
        "budget": {
            "max_items": 12,
            "max_tokens": _window(1.35),
            "max_items_per_source": 6,
            "max_tokens_per_source": 2500,
        },
    }
    assert advice == {
        "should_compact": False,
        "pressure": active / _window(1.35),
        "reasons": [],
        "turns_until_full": advice["turns_until_full"],
        "recommended_strategy": None,
        "cache": advice["cache"],
        "active_tokens": active,
        "provider_tokens_estimate": _estimate(active, 1.35),
        "tokenizer": CLAUDE_DEFAULT,
    }
    # Priced by Anthropic's terms, moments after the assembly: the cache is warm.
    assert (advice["cache"]["state"], advice["cache"]["ttl_seconds"]) == ("warm", 300)
    assert advice["cache"]["idle_seconds"] < 300
    assert window == {
        "session_id": session_id,
        "context_window": CONTEXT_WINDOW,
        "usable_window": USABLE,
        "window_tokens": _window(1.35),
        "active_tokens": active,
        "provider_tokens_estimate": _estimate(active, 1.35),
        "by_source_class": {"history": active},
        "pressure": advice["pressure"],
        "tokenizer": CLAUDE_DEFAULT,
    }


def test_usage_reports_fit_overhead_and_ratio_and_budgets_follow_them(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, "claude-sonnet-4-5", context_window=LARGE_WINDOW)
    goal = client.put(f"/sessions/{session_id}/goal", json={"text": "Make the export UTF-8."})
    assert goal.status_code == 200, goal.text
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    counted_before = {
        metric: _calibration_counts(client, metric)["anthropic"]
        for metric in (
            "contextd_calibration_observed_ratio",
            "contextd_calibration_overhead_tokens",
            "contextd_calibration_drift_ratio",
        )
    }

    # The provider counts 15,000 tokens of tools and framing, then 1.3 per exact token.
    first = _assemble(client, session_id)
    reported = _report(client, session_id, first, 1.3, overhead=TOOLS)
    # One small report identifies no slope: the default ratio stands, the rest is overhead,
    # and the window keeps most of its size (the ratio alone would have been bounded at 2.5).
    overhead = round(reported - 1.35 * first["total_tokens"])  # the fit rounds the difference
    assert _tokenizer(client, session_id) == {
        **CLAUDE_DEFAULT,
        "overhead_tokens": overhead,
        "calibrated": True,
        "samples": 1,
    }
    _append(client, session_id, _turn(2, 600))
    budget = _assemble(client, session_id)["budget"]["max_tokens"]
    assert budget == _window(1.35, overhead, usable=LARGE_USABLE)
    assert reported / first["total_tokens"] > 2.5
    assert budget > 1.5 * _window(2.5, usable=LARGE_USABLE)

    # The history grows, and with the spread of its sizes the slope is identified.
    reports = 1
    for number in range(3, 11):
        _report(client, session_id, _assemble(client, session_id), 1.3, overhead=TOOLS)
        reports += 1
        assert _tokenizer(client, session_id)["samples"] == reports
        _append(client, session_id, _turn(number, 600))
    tokenizer = _tokenizer(client, session_id)
    ratio, overhead = tokenizer["ratio"], tokenizer["overhead_tokens"]
    assert ratio == pytest.approx(1.3, abs=0.001)
    assert overhead == pytest.approx(TOOLS, abs=10)
    for metric, before in counted_before.items():
        assert _calibration_counts(client, metric)["anthropic"] == before + reports

    calibrated = {
        **CLAUDE_DEFAULT,
        "ratio": ratio,
        "overhead_tokens": overhead,
        "calibrated": True,
        "samples": reports,
    }
    assert tokenizer == calibrated
    assembled = _assemble(client, session_id)
    advice = _get(client, f"/sessions/{session_id}/compaction-advice")
    window = _get(client, f"/sessions/{session_id}/context-window")
    total = assembled["total_tokens"]
    window_tokens = _window(ratio, overhead, usable=LARGE_USABLE)
    assert window_tokens == pytest.approx((LARGE_USABLE - TOOLS) / 1.3, rel=1e-3)
    assert (
        assembled["budget"]["max_tokens"],
        assembled["provider_tokens_estimate"],
        assembled["tokenizer"],
    ) == (window_tokens, _estimate(total, ratio, overhead), calibrated)
    # The pressure weighs the active tokens against what the window leaves beside the overhead.
    assert advice["pressure"] == total / window_tokens
    assert advice["pressure"] * (LARGE_USABLE - overhead) == pytest.approx(total * ratio, rel=1e-3)
    assert assembled["advice"]["pressure"] == advice["pressure"]
    goal_tokens = window["by_source_class"]["goal"]
    assert window == {
        "session_id": session_id,
        "context_window": LARGE_WINDOW,
        "usable_window": LARGE_USABLE,
        "window_tokens": window_tokens,
        "active_tokens": total,
        "provider_tokens_estimate": _estimate(total, ratio, overhead),
        "by_source_class": {"goal": goal_tokens, "history": total - goal_tokens},
        "pressure": advice["pressure"],
        "tokenizer": calibrated,
    }
    # The estimate of a whole request is what the provider counts for one.
    assert _estimate(total, ratio, overhead) == pytest.approx(TOOLS + 1.3 * total, abs=10)
    # Reading the stored plan gives the answer as it was.
    stored = _get(client, f"/assemblies/{assembled['assembly_id']}")["response"]
    assert stored["tokenizer"] == calibrated


def test_a_usage_report_of_a_ratio_only_calibration_continues_from_its_ratio(
    client: TestClient, session_id: str, postgres_url: str
) -> None:
    """A calibration stored before overheads were fitted reads as overhead 0, and the next
    report fits on from its ratio."""
    _session(client, session_id, "claude-sonnet-4-5")
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    engine = create_engine(postgres_url)
    with engine.begin() as db:
        db.execute(
            update(SessionRow)
            .where(SessionRow.external_id == session_id)
            .values(calibration={"ratio": 1.5, "samples": 4, "assemblies": ["asm_old"]})
        )
    engine.dispose()
    old = {**CLAUDE_DEFAULT, "ratio": 1.5, "calibrated": True, "samples": 4}
    assert _tokenizer(client, session_id) == old
    assembled = _assemble(client, session_id)
    assert assembled["budget"]["max_tokens"] == _window(1.5)
    reported = _report(client, session_id, assembled, 1.5, overhead=600)
    assert _tokenizer(client, session_id) == {
        **old,
        "overhead_tokens": reported - round(1.5 * assembled["total_tokens"]),
        "samples": 5,
    }


def test_an_openai_session_in_its_own_encoding_keeps_ratio_1_and_fits_its_overhead(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "gpt-4o-2024-08-06")
    assert created["tokenizer"] == EXACT
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    counted_before = _calibration_counts(client)
    for _ in range(3):
        assembled = _assemble(client, session_id)
        reported = _report(client, session_id, assembled, 1.0, overhead=2000)
    assembled = _assemble(client, session_id)
    # The counts are the provider's: what it counts beyond them is overhead, never a ratio.
    overhead = reported - assembled["total_tokens"]
    assert overhead == 2000
    assert (
        _tokenizer(client, session_id),
        assembled["budget"]["max_tokens"],
        assembled["provider_tokens_estimate"],
    ) == (
        {**EXACT, "overhead_tokens": overhead, "calibrated": True, "samples": 3},
        USABLE - overhead,
        assembled["total_tokens"] + overhead,
    )
    assert _calibration_counts(client)["openai"] == counted_before["openai"] + 3


def test_an_openai_model_in_another_encoding_is_calibrated(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "gpt-4", encoding="o200k_base")
    assert created["tokenizer"] == {**EXACT, "ratio": 1.1, "exact": False}
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    _report(client, session_id, _assemble(client, session_id), 1.05)
    # Fewer tokens than the default ratio assumed: a lower ratio, not a negative overhead.
    tokenizer = _tokenizer(client, session_id)
    assert (tokenizer["ratio"], tokenizer["overhead_tokens"]) == (pytest.approx(1.05, abs=0.002), 0)


def test_reporting_an_assembly_again_does_not_move_the_ratio(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, "gemini-2.5-pro")
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    assembled = _assemble(client, session_id)
    _report(client, session_id, assembled, 1.4)
    once = _tokenizer(client, session_id)
    _report(client, session_id, assembled, 2.4)
    _report(client, session_id, assembled, 1.4)
    assert _tokenizer(client, session_id) == once
    assert (once["family"], once["samples"]) == ("google", 1)


def test_usage_without_its_assembly_or_counted_in_another_encoding_does_not_calibrate(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, "claude-opus-4-1")
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    plain = client.post(f"/sessions/{session_id}/usage", json={"input_tokens": 9000})
    assert plain.status_code == 204, plain.text
    # Counted in cl100k_base: its tokens are not the session's encoding's.
    _report(client, session_id, _assemble(client, session_id, encoding="cl100k_base"), 1.6)
    assert _tokenizer(client, session_id) == CLAUDE_DEFAULT


def test_a_fork_starts_from_its_parents_calibration(client: TestClient, session_id: str) -> None:
    _session(client, session_id, "claude-haiku-4-5")
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    assembled = _assemble(client, session_id)
    reported = _report(client, session_id, assembled, 1.35, overhead=3000)
    parent = _tokenizer(client, session_id)
    forked = client.post(f"/sessions/{session_id}/fork", json={"session_id": f"{session_id}-fork"})
    assert forked.status_code == 201, forked.text
    assert _tokenizer(client, f"{session_id}-fork") == parent
    assert parent == {
        **CLAUDE_DEFAULT,
        "overhead_tokens": reported - round(1.35 * assembled["total_tokens"]),
        "calibrated": True,
        "samples": 1,
    }


def test_calibration_does_not_move_the_stable_cut_of_the_history(
    client: TestClient, session_id: str
) -> None:
    """The window follows every report, the points the history is cut at do not: a report
    between two calls leaves the cut, and the reused prefix, where they were."""
    _session(client, session_id, "claude-sonnet-4-5")
    _append(client, session_id, [user_msg("Fix the export.")])
    # Several windows of history: a step of half the calibrated window (the rule before
    # calibration had a ratio to move) cut it elsewhere after the report below.
    for number in range(1, 41):
        _append(client, session_id, _turn(number, 400))
    first = _assemble(client, session_id)
    kept = [i["id"] for i in first["items"] if i["source"] == "history"]
    assert kept[0] != "history:0"
    # The provider counts a little less than the default assumed: the window grows.
    _report(client, session_id, first, 1.3)
    second = _assemble(client, session_id)
    assert second["budget"]["max_tokens"] > first["budget"]["max_tokens"]
    assert [i["id"] for i in second["items"] if i["source"] == "history"] == kept
    assert second["cache"]["reused_prefix_tokens"] == first["total_tokens"]


def test_the_recall_tool_is_charged_until_the_fitted_overhead_holds_it(
    client: TestClient, session_id: str
) -> None:
    """Usage reports count the tool definitions the assembly handed out: once a report fits
    an overhead that covers them, they are no longer charged beside it."""
    _session(client, session_id, "claude-sonnet-4-5", context_window=LARGE_WINDOW, recall_tool=True)
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    first = _assemble(client, session_id)
    tools = first["tools_tokens"]
    assert tools > 0
    window = _get(client, f"/sessions/{session_id}/context-window")
    assert window["by_source_class"]["tools"] == tools
    assert first["advice"]["pressure"] == (first["total_tokens"] + tools) / _window(
        1.35, usable=LARGE_USABLE
    )
    # The provider counts the tools and its framing as 15,000 tokens of overhead.
    _report(client, session_id, first, 1.35, overhead=TOOLS)
    overhead = _tokenizer(client, session_id)["overhead_tokens"]
    assert overhead >= tools
    second = _assemble(client, session_id)
    window_tokens = _window(1.35, overhead, usable=LARGE_USABLE)
    assert second["tools_tokens"] == tools  # still sent, and still said
    assert "tools" not in _get(client, f"/sessions/{session_id}/context-window")["by_source_class"]
    assert second["advice"]["pressure"] == second["total_tokens"] / window_tokens
