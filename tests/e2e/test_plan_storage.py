"""On PostgreSQL a plan is written after its answer is sent, yet read at once on any connection
and any replica: real servers, real connections."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

from tests.builders import user_msg
from tests.e2e.servers import running


def _candidates(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"doc-{n}",
            "content": f"document {n} " + "word " * 400,
            "locator": f"file://docs/{n}.txt",
            "relevance": (n % 10) / 10,
        }
        for n in range(count)
    ]


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


def test_a_plan_is_readable_by_the_next_request_on_the_same_connection(
    postgres_url: str,
) -> None:
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    body = {"session_id": session_id, "sources": [{"source": "docs", "items": _candidates(300)}]}
    with running(postgres_url) as server, httpx.Client(base_url=server.base, timeout=30) as client:
        client.post("/sessions", json={"session_id": session_id}).raise_for_status()
        client.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
        ).raise_for_status()
        before = _metric(client.get("/metrics").text, "contextd_plan_store_duration_seconds_count")
        answers = []
        for _ in range(20):
            made = client.post("/assemble", json=body)
            assert made.status_code == 201, made.text
            answer = made.json()
            answers.append(answer)
            stored = client.get(f"/assemblies/{answer['assembly_id']}")
            assert stored.status_code == 200, stored.text
            assert stored.json()["response"] == answer
            assert stored.json()["request"] == body
        after = _metric(client.get("/metrics").text, "contextd_plan_store_duration_seconds_count")
    assert after - before == 20
    assert len({a["assembly_id"] for a in answers}) == 20
    # Each call's prefix is measured against the plan stored just before it on the lineage.
    assert answers[0]["cache"]["reused_prefix_tokens"] == 0
    assert all(
        a["cache"]["reused_prefix_tokens"] == a["total_tokens"] and a["cache"]["new_tokens"] == 0
        for a in answers[1:]
    )


def test_an_answered_plan_is_found_at_once_on_another_connection_and_another_replica(
    postgres_url: str,
) -> None:
    # A large request (stored as received) and a small answer: the plan takes a while to
    # write, the caller has the id at once.
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    sources = [{"source": "docs", "items": _candidates(300)}]
    budget = {"max_tokens": 2000}
    bodies = [
        {"sources": sources, "budget": budget},
        {"session_id": session_id, "sources": sources, "budget": budget},
    ]
    with (
        running(postgres_url) as first,
        running(postgres_url) as second,
        httpx.Client(base_url=first.base, timeout=30) as caller,
        httpx.Client(base_url=first.base, timeout=30) as same_replica,
        httpx.Client(base_url=second.base, timeout=30) as other_replica,
    ):
        caller.post("/sessions", json={"session_id": session_id}).raise_for_status()
        caller.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
        ).raise_for_status()
        answers: list[dict[str, Any]] = []
        found: list[httpx.Response] = []
        for n in range(40):
            made = caller.post("/assemble", json=bodies[n % 2])
            assert made.status_code == 201, made.text
            answers.append(made.json())
            # Whichever reader asks first asks while the plan's write may still be under way.
            readers = (same_replica, other_replica) if n % 4 < 2 else (other_replica, same_replica)
            found.extend(
                reader.get(f"/assemblies/{answers[-1]['assembly_id']}") for reader in readers
            )
    assert [stored.status_code for stored in found] == [200] * len(found)
    assert [stored.json()["response"] for stored in found] == [a for a in answers for _ in "ab"]


def test_the_next_session_call_on_another_connection_or_replica_reuses_the_plan_before_it(
    postgres_url: str,
) -> None:
    # A long history and a short request: the plan to store is large and the next call is quick
    # to reach the lineage. Each pair of calls is a new unit's lineage, so the second call of a
    # pair has only the first one to find.
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    history = [user_msg(f"turn {n} " + "word " * 1000) for n in range(40)]
    with (
        running(postgres_url) as first,
        running(postgres_url) as second,
        httpx.Client(base_url=first.base, timeout=30) as one,
        httpx.Client(base_url=first.base, timeout=30) as another,
        httpx.Client(base_url=second.base, timeout=30) as other_replica,
    ):
        one.post("/sessions", json={"session_id": session_id}).raise_for_status()
        one.post(f"/sessions/{session_id}/items", json={"items": history}).raise_for_status()
        pairs = [(one, another), (another, other_replica), (other_replica, one)]
        made: list[httpx.Response] = []
        for n in range(30):
            body = {"session_id": session_id, "unit": f"unit-{n}"}
            # The second call is sent as soon as the first's answer is in, before it is parsed.
            made.extend(caller.post("/assemble", json=body) for caller in pairs[n % 3])
    assert [m.status_code for m in made] == [201] * 60
    answers = [m.json() for m in made]
    whole = answers[0]["total_tokens"]
    assert [a["total_tokens"] for a in answers] == [whole] * 60
    items = len(answers[0]["items"])
    last = answers[0]["items"][-1]["id"]
    assert [a["cache"] for a in answers] == [
        {
            "reused_prefix_tokens": 0,
            "new_tokens": whole,
            "reused_prefix_items": 0,
            "last_reused_item_id": None,
            "break": None,
        },
        {
            "reused_prefix_tokens": whole,
            "new_tokens": 0,
            "reused_prefix_items": items,
            "last_reused_item_id": last,
            "break": None,
        },
    ] * 30


def test_an_assembly_that_fails_after_taking_its_locks_leaves_none_held(postgres_url: str) -> None:
    # A missing manifest is found missing after the session's lock and the plan's are taken. A
    # lock left held would make the session's next call on the other replica wait for the
    # statement timeout, and answer 503.
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    failing = {"session_id": session_id, "manifest": "missing", "role": "coder"}
    with (
        running(postgres_url, CTX_DB_TIMEOUT_SECONDS="2") as first,
        running(postgres_url, CTX_DB_TIMEOUT_SECONDS="2") as second,
        httpx.Client(base_url=first.base, timeout=30) as one,
        httpx.Client(base_url=second.base, timeout=30) as other_replica,
    ):
        one.post("/sessions", json={"session_id": session_id}).raise_for_status()
        one.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
        ).raise_for_status()
        statuses = []
        for _ in range(5):
            statuses.append(one.post("/assemble", json=failing).status_code)
            statuses.append(
                other_replica.post("/assemble", json={"session_id": session_id}).status_code
            )
    assert statuses == [404, 201] * 5


def _waiting(conninfo: str, *, wait_event: str, query_start: str) -> bool:
    """Whether a server connection waits on `wait_event` in a statement starting so."""
    with psycopg.connect(conninfo, autocommit=True) as probe:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = %s AND query ILIKE %s",
            (wait_event, f"{query_start}%"),
        ).fetchone()
    return row is not None and row[0] > 0


def _until(condition: Callable[[], bool]) -> None:
    for _ in range(4_000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the server never reached the state the test waits for")


def test_a_usage_report_waiting_for_its_plan_leaves_the_plans_write_free_to_finish(
    postgres_url: str,
) -> None:
    # A report naming an assembly whose plan is still being written waits for the plan. It must
    # not hold its session's row meanwhile: the plan's insert share-locks that row (its foreign
    # key), and the two waiting on each other would be a deadlock that loses the plan.
    conninfo = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    session_id = f"plans-{uuid.uuid4().hex[:8]}"
    with (
        running(postgres_url) as server,
        httpx.Client(base_url=server.base, timeout=60) as caller,
        httpx.Client(base_url=server.base, timeout=60) as reporter,
        psycopg.connect(conninfo) as blocker,
    ):
        caller.post("/sessions", json={"session_id": session_id}).raise_for_status()
        caller.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
        ).raise_for_status()
        # Inserts into the plans table wait while this is held: the next plan's write, done
        # after its answer, waits here with the plan's lock taken.
        blocker.execute("LOCK TABLE assemblies IN SHARE MODE")
        answer = caller.post("/assemble", json={"session_id": session_id})
        assert answer.status_code == 201, answer.text
        assembly_id = answer.json()["assembly_id"]
        _until(lambda: _waiting(conninfo, wait_event="relation", query_start="INSERT INTO"))
        reported: list[httpx.Response] = []
        usage = {"assembly_id": assembly_id, "input_tokens": 500, "cached_tokens": 0}
        thread = threading.Thread(
            target=lambda: reported.append(
                reporter.post(f"/sessions/{session_id}/usage", json=usage)
            )
        )
        thread.start()
        _until(lambda: _waiting(conninfo, wait_event="advisory", query_start="SELECT"))
        blocker.rollback()  # the plan's write goes on, then the report
        thread.join()
        stored = caller.get(f"/assemblies/{assembly_id}")
        failures = _metric(caller.get("/metrics").text, "contextd_plan_store_failures_total")
    assert [response.status_code for response in reported] == [204]
    assert stored.status_code == 200, stored.text
    assert failures == 0
