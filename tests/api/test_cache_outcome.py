"""Issue 44 items 2 and 3: every provider cache outcome classified, by the session's cache
terms. A usage report naming an assembly compares the provider's cached tokens with the
assembly's predicted reused prefix (in provider tokens) and stores the class on the assembly
(`GET /assemblies/{id}` → `cache_outcome`); the misses are counted in
`contextd_cache_misses_total{reason,unit}`. Over HTTP, on PostgreSQL, from crafted reports."""

from __future__ import annotations

import math
import time
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from tests.builders import long_text, tool_call, tool_output, user_msg

UNIT = "outcomes"


def _session(client: TestClient, session_id: str, *, words: int, **settings: Any) -> None:
    body = {"session_id": session_id, "model": "gpt-4o", **settings}
    assert client.post("/sessions", json=body).status_code == 201
    items = [
        user_msg("why does the build fail?"),
        tool_call("c1"),
        tool_output("c1", long_text(words)),
    ]
    assert client.post(f"/sessions/{session_id}/items", json={"items": items}).status_code == 201


def _two_calls(client: TestClient, session_id: str, *, wait: float = 0) -> dict[str, Any]:
    """Two assemblies of the session's lineage, the second reusing the first's history; the
    second's answer."""
    client.post("/assemble", json={"session_id": session_id, "unit": UNIT}).raise_for_status()
    time.sleep(wait)
    more = [tool_call("c2"), tool_output("c2", "ok")]
    client.post(f"/sessions/{session_id}/items", json={"items": more}).raise_for_status()
    answer = client.post("/assemble", json={"session_id": session_id, "unit": UNIT})
    assert answer.status_code == 201, answer.text
    second: dict[str, Any] = answer.json()
    return second


def _predicted(answer: dict[str, Any]) -> int:
    """The reused prefix in the provider's tokens, as the session's tokenizer converts it."""
    tokenizer: dict[str, float] = answer["tokenizer"]
    reused: int = answer["cache"]["reused_prefix_tokens"]
    return math.ceil(round(tokenizer["overhead_tokens"] + reused * tokenizer["ratio"], 6))


def _report(client: TestClient, session_id: str, answer: dict[str, Any], cached: int) -> str:
    report = {"assembly_id": answer["assembly_id"], "cached_tokens": cached}
    assert client.post(f"/sessions/{session_id}/usage", json=report).status_code == 204
    stored = client.get(f"/assemblies/{answer['assembly_id']}").json()
    outcome: str = stored["cache_outcome"]
    return outcome


def _misses(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "contextd_cache_misses_total", {"reason": reason, "unit": UNIT}
    )
    return value or 0.0


def test_each_outcome_is_classified_and_stored_on_the_assembly(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, words=3_000)
    answer = _two_calls(client, session_id)
    predicted = _predicted(answer)
    assert predicted > 1024  # gpt-4o: OpenAI's minimum prefix and 128-token blocks
    assert client.get(f"/assemblies/{answer['assembly_id']}").json()["cache_outcome"] is None
    evicted = _misses("evicted")
    assert _report(client, session_id, answer, cached=predicted - 100) == "as_predicted"
    assert _report(client, session_id, answer, cached=predicted + 1_000) == "more_than_predicted"
    # Within the TTL (five minutes for OpenAI), yet missed: evicted, or routed elsewhere.
    assert _report(client, session_id, answer, cached=0) == "evicted"
    assert _misses("evicted") == evicted + 1


def test_a_prefix_under_the_providers_minimum_is_told_apart(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, words=200)
    answer = _two_calls(client, session_id)
    assert 0 < _predicted(answer) < 1024
    below = _misses("below_minimum")
    assert _report(client, session_id, answer, cached=0) == "below_minimum"
    assert _misses("below_minimum") == below + 1


def test_a_call_after_the_ttl_is_expired_by_the_sessions_own_terms(
    client: TestClient, session_id: str
) -> None:
    """The TTL overridden to one second, the only clock this needs: the lineage's next call
    comes 1.5 s after the one before it."""
    _session(client, session_id, words=3_000, cache={"ttl_seconds": 1})
    created = client.get(f"/sessions/{session_id}").json()["cache"]
    assert created == {
        "read_price": 0.1,
        "write_price": 1.0,
        "ttl_seconds": 1,
        "minimum_prefix": 1024,
        "block": 128,
    }
    answer = _two_calls(client, session_id, wait=1.5)
    expired = _misses("expired")
    assert _report(client, session_id, answer, cached=0) == "expired"
    assert _misses("expired") == expired + 1


def test_the_terms_follow_the_model_family_and_refuse_nonsense(client: TestClient) -> None:
    anthropic = client.post("/sessions", json={"model": "claude-sonnet-4-5"}).json()["cache"]
    assert anthropic == {
        "read_price": 0.1,
        "write_price": 1.25,
        "ttl_seconds": 300,
        "minimum_prefix": 1024,
        "block": 1,
    }
    refused = client.post("/sessions", json={"cache": {"ttl_seconds": 0, "colour": "red"}})
    assert refused.status_code == 422
    assert {tuple(e["loc"]) for e in refused.json()["error"]["details"]} == {
        ("body", "cache", "ttl_seconds"),
        ("body", "cache", "colour"),
    }
