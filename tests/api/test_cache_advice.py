"""Issue 44 item 4: compaction advice that prices the prompt cache, over HTTP on PostgreSQL, on a
clock the test moves (`create_app`'s `clock`).

A session's lineage whose last call came longer ago than its cache's TTL has nothing cached
left to lose: the advice says to compact now (`cache_cold`) though the window is only half full,
and states what the compaction saves and costs. Within the TTL the same history is left alone,
and a session that bought a longer TTL stays warm for it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.builders import long_text, tool_call, tool_output, user_msg

UNIT = "priced"


class MovableClock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture(scope="module")
def service(postgres_url: str, clock: MovableClock) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=postgres_url), clock=clock)) as client:
        yield client


def _half_full(service: TestClient, session_id: str, **cache: int) -> None:
    """A session whose active history fills about 60% of a 20,000-token usable window, with
    Anthropic's cache terms (five minutes, writes at 1.25)."""
    body = {
        "session_id": session_id,
        "context_window": 40_000,
        "model": "claude-sonnet-4-5",
        "cache": cache,
    }
    assert service.post("/sessions", json=body).status_code == 201
    items = [user_msg("why does the build fail?")]
    for n in range(6):
        items += [tool_call(f"c{n}"), tool_output(f"c{n}", long_text(2_000))]
    answer = service.post(f"/sessions/{session_id}/items", json={"items": items})
    assert answer.status_code == 201, answer.text


def _turn(service: TestClient, session_id: str, n: int) -> None:
    items = [tool_call(f"c{n}"), tool_output(f"c{n}", "ok")]
    answer = service.post(f"/sessions/{session_id}/items", json={"items": items})
    assert answer.status_code == 201, answer.text


def _assemble(service: TestClient, session_id: str) -> dict[str, Any]:
    answer = service.post("/assemble", json={"session_id": session_id, "unit": UNIT})
    assert answer.status_code == 201, answer.text
    advice: dict[str, Any] = answer.json()["advice"]
    return advice


def _advice(service: TestClient, session_id: str) -> dict[str, Any]:
    answer = service.get(f"/sessions/{session_id}/compaction-advice", params={"unit": UNIT})
    assert answer.status_code == 200, answer.text
    advice: dict[str, Any] = answer.json()
    return advice


def test_an_expired_cache_advises_compacting_now(
    service: TestClient, clock: MovableClock, session_id: str
) -> None:
    _half_full(service, session_id)
    first = _assemble(service, session_id)
    assert 0.5 <= first["pressure"] < 0.9
    assert first["should_compact"] is False
    assert first["cache"]["state"] == "empty"  # the lineage's first call: nothing cached yet

    clock.advance(60)
    _turn(service, session_id, 6)  # the call's output
    warm = _advice(service, session_id)
    assert (warm["should_compact"], warm["reasons"]) == (False, [])
    cache = warm["cache"]
    assert (cache["state"], cache["idle_seconds"], cache["ttl_seconds"]) == ("warm", 60, 300)
    # Writing the compacted context at 1.25 where it would be read at 0.1.
    assert cache["cost"] > 0
    assert cache["at_least_tokens"] > 0

    clock.advance(300)
    cold = _advice(service, session_id)
    assert cold["should_compact"] is True
    # Tool outputs are most of the history, and clearing them brings it to the low watermark.
    assert cold["recommended_strategy"] == "clear_tool_results"
    assert [reason["signal"] for reason in cold["reasons"]] == ["cache_cold"]
    assert cold["reasons"][0]["value"] == 360
    cache = cold["cache"]
    assert (cache["state"], cache["idle_seconds"], cache["cost"], cache["at_least_tokens"]) == (
        "cold",
        360,
        0,
        0,
    )
    assert cache["saving"] > 0
    assert cache["reduction_tokens"] > 0
    # The assembly made now carries the same advice; another lineage of the session has had no
    # call at all.
    assert _assemble(service, session_id) == {
        key: value for key, value in cold.items() if key in first
    }
    other = service.get(f"/sessions/{session_id}/compaction-advice", params={"unit": "other"})
    assert other.json()["cache"]["state"] == "empty"

    # Following the advice before sending: the compaction applies, and the context sent instead
    # has nothing left to advise; its call comes after the same idle time (the assembly that
    # advised the compaction was not sent). The next call, moments later, finds it cached.
    strategy = cold["recommended_strategy"]
    compacted = service.post("/compact", json={"session_id": session_id, "strategy": strategy})
    assert compacted.status_code == 201, compacted.text
    sent = _assemble(service, session_id)
    assert sent["should_compact"] is False
    assert sent["pressure"] < first["pressure"]
    assert (sent["cache"]["state"], sent["cache"]["idle_seconds"]) == ("cold", 360)
    _turn(service, session_id, 7)
    clock.advance(5)
    after = _assemble(service, session_id)
    assert (after["cache"]["state"], after["cache"]["idle_seconds"]) == ("warm", 5)


def test_a_bought_ttl_keeps_the_cache_warm_for_it(
    service: TestClient, clock: MovableClock, session_id: str
) -> None:
    _half_full(service, session_id, ttl_seconds=3_600)
    _assemble(service, session_id)
    clock.advance(1_800)
    advice = _advice(service, session_id)
    assert (advice["should_compact"], advice["reasons"]) == (False, [])
    assert (advice["cache"]["state"], advice["cache"]["ttl_seconds"]) == ("warm", 3_600)
    clock.advance(1_801)
    assert _advice(service, session_id)["reasons"][0]["signal"] == "cache_cold"


def test_without_a_cache_discount_the_advice_weighs_tokens_alone(
    service: TestClient, clock: MovableClock, session_id: str
) -> None:
    _half_full(service, session_id, read_price=1, write_price=1)
    _assemble(service, session_id)
    clock.advance(3_600)
    advice = _advice(service, session_id)
    assert (advice["should_compact"], advice["reasons"]) == (False, [])
    assert advice["cache"]["state"] == "cold"
    assert advice["cache"]["cost"] == 0


def test_the_call_sent_after_a_compaction_is_judged_by_the_call_before_it(
    service: TestClient, clock: MovableClock, session_id: str
) -> None:
    """The assembly that advised the compaction was never sent: the provider's miss on the call
    sent instead is the TTL's (`expired`), not an eviction moments after that assembly."""
    _half_full(service, session_id)
    goal = {"text": "Keep the build green. " + long_text(1_500)}
    assert service.put(f"/sessions/{session_id}/goal", json=goal).status_code == 200
    _assemble(service, session_id)
    _turn(service, session_id, 6)
    clock.advance(400)
    advised = _assemble(service, session_id)
    assert advised["should_compact"] is True
    strategy = advised["recommended_strategy"]
    compacted = service.post("/compact", json={"session_id": session_id, "strategy": strategy})
    assert compacted.status_code == 201, compacted.text
    answer = service.post("/assemble", json={"session_id": session_id, "unit": UNIT}).json()
    assert answer["cache"]["reused_prefix_tokens"] > 1_500  # the goal, pinned ahead
    report = {"assembly_id": answer["assembly_id"], "cached_tokens": 0}
    assert service.post(f"/sessions/{session_id}/usage", json=report).status_code == 204
    stored = service.get(f"/assemblies/{answer['assembly_id']}").json()
    assert stored["cache_outcome"] == "expired"


def _logged_at(service: TestClient, session_id: str) -> list[tuple[str, datetime]]:
    page = service.get(f"/sessions/{session_id}/items", params={"limit": 1000})
    assert page.status_code == 200, page.text
    return [
        (fact["item"]["type"], datetime.fromisoformat(fact["recorded_at"]))
        for fact in page.json()["items"]
    ]


@pytest.mark.parametrize("pause", [5, 400])
def test_the_log_is_recorded_by_the_service_clock_and_evaluated_on_it(
    service: TestClient, clock: MovableClock, session_id: str, pause: int
) -> None:
    """Every fact the service writes carries the time of the service's clock, so that an
    evaluation, whose clock is the log's, meets the idle gaps the session met: after a pause
    longer than the cache's five minutes, the runtime it replays compacts, as one would have."""
    _half_full(service, session_id)
    opened = clock.now
    clock.advance(5)
    goal = service.put(f"/sessions/{session_id}/goal", json={"text": "make the build pass"})
    assert goal.status_code == 200, goal.text
    clock.advance(5)
    _turn(service, session_id, 10)
    clock.advance(pause)
    _turn(service, session_id, 11)
    turned = clock.now
    clock.advance(5)
    _turn(service, session_id, 12)
    clock.advance(5)
    compacted = service.post("/compact", json={"session_id": session_id, "strategy": "truncate"})
    assert compacted.status_code == 201, compacted.text

    logged = _logged_at(service, session_id)
    assert [at for _, at in logged] == [
        *[opened] * 13,
        opened + timedelta(seconds=5),
        *[opened + timedelta(seconds=10)] * 2,
        *[turned] * 2,
        *[turned + timedelta(seconds=5)] * 2,
        turned + timedelta(seconds=10),
    ]
    assert [kind for kind, _ in logged[12:]] == [
        "function_call_output",
        "contextd.goal",
        *["function_call", "function_call_output"] * 3,
        "contextd.compaction",
    ]
    evaluated = service.post(f"/sessions/{session_id}/evaluate", json={"variants": []})
    assert evaluated.status_code == 200, evaluated.text
    (current,) = evaluated.json()["variants"]
    # Past the TTL the cache is cold, and the advice says to compact now (`cache_cold`).
    assert current["compactions"] == (1 if pause > 300 else 0)
