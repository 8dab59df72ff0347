"""`POST /sessions/{id}/evaluate` over HTTP on PostgreSQL: public trajectories run as a runtime
runs them (append, assemble, compact when advised), then replayed under variants."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.contract.evaluation import EvaluateResponse, EvaluationJobResponse
from app.domain.evaluation import VariantTally
from app.domain.grounding import ground
from app.domain.items import is_model_output, visible_text
from app.domain.prompt_cache import CacheTerms
from app.main import create_app
from app.settings import Settings
from tests.conftest import TRAJECTORIES, load_trajectory

RUNS = {path.stem: path for path in TRAJECTORIES}
THREE = (
    "mswea_ds_chat_test_astropy__astropy-12907",
    "swea_ctf_crypto_katy",
    "tau_airline_gpt4o_task33_trial0",
)
WINDOW = 8_000
VARIANTS: list[dict[str, Any]] = [
    {"name": "never", "follow_advice": False},
    {"name": "wide", "context_window": 400_000},
    {"name": "truncating", "strategy": "truncate", "keep_recent": 2},
    {"name": "early", "watermarks": {"high": 0.6, "low": 0.2}, "recall_tool": False},
    {"name": "blind", "cache": {"read_price": 1.0, "write_price": 1.0}},
]


def _goal(items: list[dict[str, Any]]) -> str:
    return next(visible_text(item) for item in items if item.get("role") == "user")


def _run_as_a_runtime(
    client: TestClient,
    session_id: str,
    items: list[dict[str, Any]],
    *,
    own_summary: str | None = None,
    created: bool = False,
) -> list[dict[str, Any]]:
    """The session made as `contextd_client`'s runtime makes one: before each model call, an
    assembly, a compaction when advised and an assembly again if it applied; the answers sent,
    in order. With `own_summary`, a product record's compaction posts it, numbered, as the
    runtime's own summary (`summarizer: client`). A session already `created` is driven as it
    is."""
    if not created:
        client.post(
            "/sessions", json={"session_id": session_id, "context_window": WINDOW}
        ).raise_for_status()
        client.put(f"/sessions/{session_id}/goal", json={"text": _goal(items)}).raise_for_status()
    sent, appended = [], 0
    points = [
        n
        for n, item in enumerate(items)
        if is_model_output(item) and (n == 0 or not is_model_output(items[n - 1]))
    ]
    for point in points:
        if point > appended:
            batch = {"items": items[appended:point]}
            client.post(f"/sessions/{session_id}/items", json=batch).raise_for_status()
            appended = point
        answer = client.post("/assemble", json={"session_id": session_id}).json()
        advice = answer["advice"]
        if advice["should_compact"] and advice["recommended_strategy"]:
            request: dict[str, Any] = {
                "session_id": session_id,
                "strategy": advice["recommended_strategy"],
            }
            if own_summary and request["strategy"] in ("summary", "handoff", "notes"):
                request["params"] = {"summarizer": "client"}
                request["summary"] = {"text": f"{own_summary} (part {point})"}
            compacted = client.post("/compact", json=request)
            if compacted.status_code == 201:
                answer = client.post("/assemble", json={"session_id": session_id}).json()
        sent.append(answer)
    client.post(
        f"/sessions/{session_id}/items", json={"items": items[appended:]}
    ).raise_for_status()
    return sent


def _tally_of(sent: list[dict[str, Any]], goal: str, terms: CacheTerms) -> dict[str, Any]:
    """The figures of the contexts the runtime actually sent, tallied as the evaluation tallies
    its own (grounding aside: it needs the log's text of what they elide)."""
    tally = VariantTally(window=10**9, terms=terms)
    for answer in sent:
        tally.call(
            answer["messages"],
            [item["tokens"] for item in answer["items"]],
            at=0.0,
            goal=goal,
            grounding=ground(frozenset(), shown="", elided=()),
            elided_forms=(),
        )
    return tally.figures()


@pytest.fixture(scope="module")
def sessions(client: TestClient) -> dict[str, list[dict[str, Any]]]:
    """Three public runs, each made by a runtime following the advice: what each sent."""
    return {
        name: _run_as_a_runtime(client, f"evaluate-{name}"[:120], load_trajectory(RUNS[name]))
        for name in THREE
    }


@pytest.mark.parametrize("name", THREE)
def test_the_sessions_own_settings_reproduce_what_the_runtime_did(
    client: TestClient, sessions: dict[str, list[dict[str, Any]]], name: str
) -> None:
    session_id = f"evaluate-{name}"[:120]
    detail = client.get(f"/sessions/{session_id}").json()
    answer = client.post(f"/sessions/{session_id}/evaluate", json={"variants": VARIANTS})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    EvaluateResponse.model_validate(body)  # the contract's own model
    assert [variant["name"] for variant in body["variants"]] == [
        "current",
        *(v["name"] for v in VARIANTS),
    ]
    current = body["variants"][0]
    sent = sessions[name]
    actual = client.get(f"/sessions/{session_id}").json()
    assert (body["calls"], current["calls"]) == (len(sent), len(sent))
    assert current["compactions"] == actual["compactions"]
    # Call for call, the same contexts: the same tokens, the same reuse.
    items = load_trajectory(RUNS[name])
    figures = _tally_of(sent, _goal(items), CacheTerms(**detail["cache"]))
    for key in (
        "input_tokens",
        "reused_tokens",
        "reuse",
        "fresh_tokens",
        "cached_tokens",
        "peak_tokens",
        "goal_kept",
        "pairing_kept",
    ):
        assert current[key] == figures[key], key
    assert current["settings"] == {
        "context_window": WINDOW,
        "strategy": None,
        "high_watermark": 0.9,
        "low_watermark": 0.25,
        "keep_recent": 3,
        "follow_advice": True,
        "recall_tool": True,
        "cache": {},
        "summarizer": "builtin",
    }
    # What the service said of each context it made, summed as it said it.
    assert current["predicted_reused_tokens"] == sum(
        answer["cache"]["reused_prefix_tokens"] for answer in sent
    )
    assert current["restated_tokens"] == sum(
        item["tokens"]
        for answer in sent
        for item in answer["items"]
        if item["id"].endswith("#restated")
    )
    assert current["history_cut_calls"] == sum(
        any(r["signal"] == "history_cut" for r in answer["advice"]["reasons"]) for answer in sent
    )
    assert current["prefix"]["named_breaks"] == dict(
        sorted(
            Counter(a["cache"]["break"]["cause"] for a in sent if a["cache"].get("break")).items()
        )
    )
    grounding = current["grounding"]
    assert grounding["calls_hiding"] == sum(bool(answer["elided"]) for answer in sent)
    assert grounding["calls_naming_every_seq"] <= grounding["calls_hiding"]
    # Every identifier one recall away is handed back by the recall search of its range.
    assert grounding["recall_checked"] == grounding["recallable"] == grounding["recall_confirmed"]
    # The service's own grades, one per call whose output used an identifier it held.
    graded = grounding["graded"]
    assert 0 < graded["calls_needing"] <= current["calls"]
    assert graded["calls_seeing_all"] <= graded["calls_needing"]
    assert graded["visible"] <= graded["needed"]
    cache = current["provider_cache"]
    assert cache["misses"] == sum(cache["misses_by_class"].values()) + cache["unclassified_misses"]


def test_variants_change_what_they_name_and_the_replay_writes_nothing(
    client: TestClient, sessions: dict[str, list[dict[str, Any]]]
) -> None:
    session_id = f"evaluate-{THREE[0]}"[:120]
    before = client.get(f"/sessions/{session_id}").json()
    plans = client.get(f"/sessions/{session_id}/items", params={"limit": 1000}).json()
    metrics = _service_metrics(client)

    first = client.post(f"/sessions/{session_id}/evaluate", json={"variants": VARIANTS})
    again = client.post(f"/sessions/{session_id}/evaluate", json={"variants": VARIANTS})

    assert first.status_code == again.status_code == 200
    assert first.content == again.content  # the same log and variants, the same bytes
    current, never, wide, truncating, early, blind = first.json()["variants"]
    assert never["compactions"] == 0 < current["compactions"]
    assert never["settings"]["follow_advice"] is False
    # A window holding the whole run: nothing compacted, nothing hidden, nothing over budget.
    assert (wide["compactions"], wide["over_budget_calls"]) == (0, 0)
    assert wide["grounding"]["visible"] == wide["grounding"]["needed"]
    assert wide["grounding"]["misses_by_form"] == {}
    assert wide["peak_tokens"] > current["peak_tokens"]
    assert truncating["settings"]["strategy"] == "truncate"
    assert truncating["compactions"] > 0
    assert early["settings"]["high_watermark"] == 0.6
    assert early["compactions"] >= current["compactions"]
    # Told no cache discount, the service weighs its advice by tokens alone; the provider
    # simulated is still the session's, and still serves reads at its discount.
    assert blind["settings"]["cache"] == {"read_price": 1.0, "write_price": 1.0}
    assert blind["cached_tokens"] > 0
    assert blind["cost"] < blind["input_tokens"]
    for variant in (current, never, truncating, early):
        grounding = variant["grounding"]
        assert (
            grounding["visible"] + grounding["recallable"] + grounding["missed"]
            == (grounding["needed"])
        )
        assert sum(grounding["misses_by_form"].values()) == grounding["recallable"]
        assert variant["pairing_kept"] == 1.0
    # Nothing written: not to the session, not to its log, not to the metrics.
    assert client.get(f"/sessions/{session_id}").json() == before
    assert client.get(f"/sessions/{session_id}/items", params={"limit": 1000}).json() == plans
    assert _service_metrics(client) == metrics


def _service_metrics(client: TestClient) -> list[str]:
    """The service's own metric samples (the process's and the HTTP layer's left out)."""
    return sorted(
        line
        for line in client.get("/metrics").text.splitlines()
        if line.startswith("contextd_") and "_http_" not in line and "_created" not in line
    )


def test_bad_variants_are_refused_before_any_work(client: TestClient, session_id: str) -> None:
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    url = f"/sessions/{session_id}/evaluate"
    nine = {"variants": [{"name": f"v{n}"} for n in range(9)]}
    twice = {"variants": [{"name": "a"}, {"name": "a", "keep_recent": 1}]}
    reserved = {"variants": [{"name": "current"}]}
    inverted = {"variants": [{"name": "a", "watermarks": {"high": 0.3, "low": 0.5}}]}
    # Inverted only against the session's own low watermark (0.25).
    below = {"variants": [{"name": "a"}, {"name": "b", "watermarks": {"high": 0.2}}]}

    codes = [
        (answer.status_code, answer.json()["error"]["code"])
        for answer in (
            client.post(url, json=body) for body in (nine, twice, reserved, inverted, below)
        )
    ]

    assert codes == [
        (422, "validation_error"),
        (422, "variant_names"),
        (422, "variant_names"),
        (422, "watermarks_out_of_order"),
        (422, "watermarks_out_of_order"),
    ]
    refused = client.post(url, json=below).json()["error"]
    assert refused["details"][0]["loc"] == ["body", "variants", 1, "watermarks"]
    assert client.post("/sessions/nobody-has-this-one/evaluate", json={}).status_code == 404


def test_limits_are_413_before_any_work_and_another_tenants_session_is_a_404(
    postgres_url: str, session_id: str
) -> None:
    settings = Settings(
        database_url=postgres_url,
        api_keys=["alpha:key-alpha", "beta:key-beta"],
        evaluate_max_facts=10,
        evaluate_max_calls=5,
    )
    alpha, beta = {"Authorization": "Bearer key-alpha"}, {"Authorization": "Bearer key-beta"}
    items = load_trajectory(RUNS[THREE[1]])
    with TestClient(create_app(settings)) as client:
        client.post("/sessions", json={"session_id": session_id}, headers=alpha)
        url = f"/sessions/{session_id}/evaluate"
        client.post(
            f"/sessions/{session_id}/items", json={"items": items[:8]}, headers=alpha
        ).raise_for_status()
        calls = client.post(url, json={"variants": [{"name": "a"}, {"name": "b"}]}, headers=alpha)
        client.post(
            f"/sessions/{session_id}/items", json={"items": items[8:20]}, headers=alpha
        ).raise_for_status()
        facts = client.post(url, json={}, headers=alpha)
        other = client.post(url, json={}, headers=beta)

    assert calls.status_code == 413, calls.text
    assert "CTX_EVALUATE_MAX_CALLS" in calls.json()["error"]["message"]
    assert facts.status_code == 413
    assert facts.json()["error"]["code"] == "payload_too_large"
    assert "CTX_EVALUATE_MAX_FACTS" in facts.json()["error"]["message"]
    assert other.status_code == 404


def test_a_tenant_evaluating_at_its_limit_gets_429_and_another_tenant_is_served(
    postgres_url: str, session_id: str
) -> None:
    settings = Settings(
        database_url=postgres_url,
        api_keys=["alpha:key-alpha", "beta:key-beta"],
        evaluate_max_concurrent_per_tenant=1,
    )
    alpha, beta = {"Authorization": "Bearer key-alpha"}, {"Authorization": "Bearer key-beta"}
    items = load_trajectory(RUNS[THREE[0]])
    # Eight variants of a 36-call run: seconds of replay, in which the others arrive.
    slow = {"variants": [{"name": f"v{n}", "keep_recent": n} for n in range(8)]}
    with TestClient(create_app(settings)) as client:
        for headers in (alpha, beta):
            client.post("/sessions", json={"session_id": session_id}, headers=headers)
            client.post(
                f"/sessions/{session_id}/items", json={"items": items[:12]}, headers=headers
            ).raise_for_status()
        client.post(
            f"/sessions/{session_id}/items", json={"items": items[12:]}, headers=alpha
        ).raise_for_status()
        url = f"/sessions/{session_id}/evaluate"
        answers: list[Any] = []

        def evaluation() -> None:
            answers.append(client.post(url, json=slow, headers=alpha))

        evaluations = [threading.Thread(target=evaluation) for _ in range(3)]
        for thread in evaluations:
            thread.start()
        other = client.post(url, json={}, headers=beta)
        for thread in evaluations:
            thread.join()

    assert sorted(answer.status_code for answer in answers) == [200, 429, 429]
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == str(settings.retry_after_seconds)
    assert refused.json()["error"]["code"] == "tenant_busy"
    assert "CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT" in refused.json()["error"]["message"]
    assert other.status_code == 200


def _job_settings(postgres_url: str, **overrides: Any) -> Settings:
    """Every evaluation a job, its progress written at every call."""
    return Settings(
        database_url=postgres_url,
        evaluate_sync_calls=0,
        evaluate_progress_seconds=1e-6,
        **overrides,
    )


def _follow(client: TestClient, location: str) -> list[dict[str, Any]]:
    """The job's states, polled until it is no longer running."""
    states = [client.get(location).json()]
    while states[-1]["status"] == "running":
        states.append(client.get(location).json())
    return states


def test_a_long_evaluation_is_a_job_whose_progress_rises_to_the_same_answer(
    client: TestClient, postgres_url: str, sessions: dict[str, list[dict[str, Any]]]
) -> None:
    session_id = f"evaluate-{THREE[1]}"[:120]
    url = f"/sessions/{session_id}/evaluate"
    at_once = client.post(url, json={"variants": VARIANTS[:2]})
    with TestClient(create_app(_job_settings(postgres_url))) as jobs:
        started = jobs.post(url, json={"variants": VARIANTS[:2]})
        states = _follow(jobs, started.headers["location"])
        again = jobs.post(url, json={"variants": VARIANTS[:2]})
        other = jobs.get(started.headers["location"].replace("eval_", "eval_0"))

    assert (at_once.status_code, started.status_code) == (200, 202)
    job = started.json()
    EvaluationJobResponse.model_validate(job)
    assert started.headers["location"] == f"/evaluations/{job['evaluation_id']}"
    assert (job["session_id"], job["status"]) == (session_id, "running")
    calls = at_once.json()["calls"]
    assert job["progress"] == {"calls_done": 0, "calls_total": 3 * calls}
    done = [state["progress"]["calls_done"] for state in states]
    assert done == sorted(done)  # progress only rises
    assert states[-1]["status"] == "done"
    assert states[-1]["progress"] == {"calls_done": 3 * calls, "calls_total": 3 * calls}
    assert states[-1]["result"] == at_once.json()  # the same evaluation, run as a job
    # Asked again once done: the same job, done.
    assert again.status_code == 202
    assert again.json() == {**states[-1], "updated_at": again.json()["updated_at"]}
    assert other.status_code == 404


def test_a_cancelled_job_stops_and_another_tenant_cannot_see_it(
    postgres_url: str, session_id: str
) -> None:
    settings = _job_settings(postgres_url, api_keys=["alpha:key-alpha", "beta:key-beta"])
    alpha, beta = {"Authorization": "Bearer key-alpha"}, {"Authorization": "Bearer key-beta"}
    slow = {"variants": [{"name": f"v{n}", "keep_recent": n} for n in range(8)]}
    with TestClient(create_app(settings)) as client:
        client.post("/sessions", json={"session_id": session_id}, headers=alpha)
        client.post(
            f"/sessions/{session_id}/items",
            json={"items": load_trajectory(RUNS[THREE[0]])},
            headers=alpha,
        ).raise_for_status()
        started = client.post(f"/sessions/{session_id}/evaluate", json=slow, headers=alpha)
        location = started.headers["location"]
        hidden = (client.get(location, headers=beta), client.delete(location, headers=beta))
        cancelled = client.delete(location, headers=alpha)
        states = [client.get(location, headers=alpha).json() for _ in range(3)]
        # Its slot is given back once its runner has stopped: the tenant evaluates again.
        while (
            retried := client.post(f"/sessions/{session_id}/evaluate", json={}, headers=alpha)
        ).status_code == 429:
            pass

    assert [answer.status_code for answer in hidden] == [404, 404]
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    total = started.json()["progress"]["calls_total"]
    assert all(state["status"] == "cancelled" for state in states)
    assert states[-1]["progress"]["calls_done"] < total
    assert states[-1]["result"] is None
    assert retried.status_code == 202


def test_a_client_variant_replays_the_summaries_the_log_recorded(
    client: TestClient, session_id: str
) -> None:
    """A runtime that posted its own summaries: the variant whose `summarizer` is `client` uses
    the one the log recorded at each compaction it replays (the replay calls no summarizer);
    the session's own settings use the built-in one."""
    own = (
        "The agent changed the booking after checking the fare rules and the passenger's "
        "stated preferences; the refund is still to be confirmed with the customer."
    )
    items = load_trajectory(RUNS["tau_airline_gpt4o_task33_trial0"])
    _run_as_a_runtime(client, session_id, items, own_summary=own)
    log = client.get(f"/sessions/{session_id}/items", params={"limit": 1000}).json()["items"]
    recorded = [
        fact["item"]["summary"]["narrative"]
        for fact in log
        if fact["item"]["type"] == "contextd.compaction" and fact["item"]["summary"]
    ]
    assert recorded
    assert all(narrative.startswith(own) for narrative in recorded)

    answer = client.post(
        f"/sessions/{session_id}/evaluate",
        json={"variants": [{"name": "own", "summarizer": "client"}]},
    )

    assert answer.status_code == 200, answer.text
    current, variant = answer.json()["variants"]
    assert (current["settings"]["summarizer"], variant["settings"]["summarizer"]) == (
        "builtin",
        "client",
    )
    assert current["compactions"] == variant["compactions"] == len(recorded)
    assert (current["recorded_summaries"], variant["recorded_summaries"]) == (0, len(recorded))
    # The records differ by their narratives, and so do the contexts that carry them.
    assert variant["input_tokens"] != current["input_tokens"]


def test_a_fork_is_replayed_from_its_parents_history(client: TestClient, session_id: str) -> None:
    """A fork's history starts from its parent's as of the fork point: the replay recreates the
    parent and replays the fork's own turns from there, making the calls the fork's runtime
    made."""
    items = load_trajectory(RUNS["swea_ctf_crypto_katy"])
    points = [
        n
        for n, item in enumerate(items)
        if is_model_output(item) and (n == 0 or not is_model_output(items[n - 1]))
    ]
    split = points[len(points) // 2]
    parent, fork = f"{session_id}-parent", f"{session_id}-fork"
    client.post("/sessions", json={"session_id": parent, "context_window": WINDOW})
    client.put(f"/sessions/{parent}/goal", json={"text": _goal(items)}).raise_for_status()
    client.post(f"/sessions/{parent}/items", json={"items": items[:split]}).raise_for_status()
    client.post(f"/sessions/{parent}/fork", json={"session_id": fork}).raise_for_status()
    sent = _run_as_a_runtime(client, fork, items[split:], created=True)

    answer = client.post(f"/sessions/{fork}/evaluate", json={"variants": []})

    assert answer.status_code == 200, answer.text
    (current,) = answer.json()["variants"]
    detail = client.get(f"/sessions/{fork}").json()
    figures = _tally_of(sent, _goal(items), CacheTerms(**detail["cache"]))
    assert current["calls"] == len(sent) == len(points) - len(points) // 2
    assert current["compactions"] == detail["compactions"]
    # Call for call the contexts the fork's runtime sent, the parent's history in them.
    for key in ("input_tokens", "reused_tokens", "cached_tokens", "peak_tokens", "goal_kept"):
        assert current[key] == figures[key], key
