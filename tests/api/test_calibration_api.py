"""Budgets in the provider's tokens over HTTP, on PostgreSQL: a session's tokenizer family from
its model, the conservative default ratio, calibration from usage reports naming their
assembly, and the windows, estimates and pressure that follow it."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import tool_call, tool_output, user_msg

# 20,000 tokens of window less the default 16,000 reserve, capped at half the window.
CONTEXT_WINDOW = 20_000
USABLE = 10_000
CLAUDE_DEFAULT = {
    "family": "anthropic",
    "ratio": 1.35,
    "calibrated": False,
    "samples": 0,
    "exact": False,
}
EXACT = {"family": "openai", "ratio": 1.0, "calibrated": False, "samples": 0, "exact": True}


def _session(client: TestClient, session_id: str, model: str, **options: Any) -> dict[str, Any]:
    body = {"session_id": session_id, "context_window": CONTEXT_WINDOW, "model": model, **options}
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


def _report(client: TestClient, session_id: str, assembly: dict[str, Any], ratio: float) -> None:
    """The provider's usage of `assembly`: `ratio` times its exact tokens."""
    usage = client.post(
        f"/sessions/{session_id}/usage",
        json={
            "assembly_id": assembly["assembly_id"],
            "input_tokens": round(assembly["total_tokens"] * ratio),
            "output_tokens": 50,
        },
    )
    assert usage.status_code == 204, usage.text


def _window(ratio: float) -> int:
    return math.floor(round(USABLE / ratio, 6))


def _estimate(tokens: int, ratio: float) -> int:
    return math.ceil(round(tokens * ratio, 6))


def _tokenizer(client: TestClient, session_id: str) -> dict[str, Any]:
    tokenizer: dict[str, Any] = _get(client, f"/sessions/{session_id}")["tokenizer"]
    return tokenizer


def _calibration_counts(client: TestClient) -> dict[str, float]:
    return {
        sample.labels["family"]: sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        if family.name == "contextd_calibration_observed_ratio"
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
        "active_tokens": active,
        "provider_tokens_estimate": _estimate(active, 1.35),
        "tokenizer": CLAUDE_DEFAULT,
    }
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


def test_usage_reports_calibrate_the_ratio_and_budgets_follow_it(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, "claude-sonnet-4-5")
    goal = client.put(f"/sessions/{session_id}/goal", json={"text": "Make the export UTF-8."})
    assert goal.status_code == 200, goal.text
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    counted_before = _calibration_counts(client)

    # The provider counts 1.5 times the exact tokens; the first report said 2.
    ratios: list[float] = []
    for number, reported in enumerate([2.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5], start=2):
        assembled = _assemble(client, session_id)
        _report(client, session_id, assembled, reported)
        tokenizer = _tokenizer(client, session_id)
        assert tokenizer == {
            "family": "anthropic",
            "ratio": tokenizer["ratio"],
            "calibrated": True,
            "samples": len(ratios) + 1,
            "exact": False,
        }
        ratios.append(tokenizer["ratio"])
        _append(client, session_id, _turn(number, 300))

    # The first report replaced the default; each later one moved the ratio 30% of the way.
    assert ratios[0] == pytest.approx(2.0, abs=0.002)
    assert ratios == sorted(ratios, reverse=True)
    for before, after in itertools.pairwise(ratios):
        assert after - 1.5 == pytest.approx(0.7 * (before - 1.5), abs=0.002)
    assert ratios[-1] == pytest.approx(1.5, abs=0.05)
    assert _calibration_counts(client)["anthropic"] == counted_before["anthropic"] + len(ratios)

    ratio = ratios[-1]
    calibrated = {**CLAUDE_DEFAULT, "ratio": ratio, "calibrated": True, "samples": len(ratios)}
    assembled = _assemble(client, session_id)
    advice = _get(client, f"/sessions/{session_id}/compaction-advice")
    window = _get(client, f"/sessions/{session_id}/context-window")
    total = assembled["total_tokens"]
    assert (
        assembled["budget"]["max_tokens"],
        assembled["provider_tokens_estimate"],
        assembled["tokenizer"],
    ) == (_window(ratio), _estimate(total, ratio), calibrated)
    # The pressure weighs the provider's tokens against the usable window.
    assert advice["pressure"] * USABLE == pytest.approx(advice["active_tokens"] * ratio, rel=1e-3)
    assert assembled["advice"]["pressure"] == advice["pressure"]
    goal_tokens = window["by_source_class"]["goal"]
    assert window == {
        "session_id": session_id,
        "context_window": CONTEXT_WINDOW,
        "usable_window": USABLE,
        "window_tokens": _window(ratio),
        "active_tokens": total,
        "provider_tokens_estimate": _estimate(total, ratio),
        "by_source_class": {"goal": goal_tokens, "history": total - goal_tokens},
        "pressure": advice["pressure"],
        "tokenizer": calibrated,
    }
    # Reading the stored plan gives the answer as it was.
    stored = _get(client, f"/assemblies/{assembled['assembly_id']}")["response"]
    assert stored["tokenizer"] == calibrated


def test_an_openai_session_in_its_own_encoding_stays_exact(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "gpt-4o-2024-08-06")
    assert created["tokenizer"] == EXACT
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    counted_before = _calibration_counts(client)
    for _ in range(3):
        _report(client, session_id, _assemble(client, session_id), 1.5)
    assembled = _assemble(client, session_id)
    assert (
        _tokenizer(client, session_id),
        assembled["budget"]["max_tokens"],
        assembled["provider_tokens_estimate"],
    ) == (EXACT, USABLE, assembled["total_tokens"])
    assert _calibration_counts(client) == counted_before


def test_an_openai_model_in_another_encoding_is_calibrated(
    client: TestClient, session_id: str
) -> None:
    created = _session(client, session_id, "gpt-4", encoding="o200k_base")
    assert created["tokenizer"] == {**EXACT, "ratio": 1.1, "exact": False}
    _append(client, session_id, [user_msg("Fix the export."), *_turn(1, 600)])
    _report(client, session_id, _assemble(client, session_id), 1.05)
    assert _tokenizer(client, session_id)["ratio"] == pytest.approx(1.05, abs=0.002)


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
    _report(client, session_id, _assemble(client, session_id), 1.6)
    parent = _tokenizer(client, session_id)
    forked = client.post(f"/sessions/{session_id}/fork", json={"session_id": f"{session_id}-fork"})
    assert forked.status_code == 201, forked.text
    assert _tokenizer(client, f"{session_id}-fork") == parent
    assert parent["ratio"] == pytest.approx(1.6, abs=0.002)


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
