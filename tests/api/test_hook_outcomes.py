"""Every failed hook outcome a client sees over HTTP says why: a machine-readable `reason` and a
`detail` naming the address, the deadline, the status or the limit; the hook metric counts it
under the same reason. Real hook endpoints on loopback, the service on PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from app.main import create_app
from app.settings import Settings
from tests.conftest import TRAJECTORIES, load_trajectory
from tests.integration.test_hooks import json_answer, serving

DEADLINE_SECONDS = 0.5
MAX_ANSWER_BYTES = 1024


@pytest.fixture(scope="module")
def hooked(postgres_url: str) -> Iterator[TestClient]:
    """The service with hooks allowed to reach loopback (where the endpoints listen), a short
    deadline and a small answer cap."""
    settings = Settings(
        database_url=postgres_url,
        hook_allowed_networks=["127.0.0.0/8"],
        hook_timeout_seconds=DEADLINE_SECONDS,
        hook_max_answer_bytes=MAX_ANSWER_BYTES,
    )
    with TestClient(create_app(settings)) as service:
        yield service


def _counted(reason: str) -> float:
    labels = {"event": "pre_compact", "outcome": "failed_open", "reason": reason}
    return REGISTRY.get_sample_value("contextd_hook_calls_total", labels) or 0.0


def _compact_with_hook(service: TestClient, session_id: str, *, url: str) -> dict[str, Any]:
    """A session holding a real trajectory, its `pre_compact` hook at `url` (failing open), and
    the answer of its compaction."""
    created = service.post(
        "/sessions", json={"session_id": session_id, "hooks": {"pre_compact": url}}
    )
    assert created.status_code == 201, created.text
    items = load_trajectory(TRAJECTORIES[4])
    appended = service.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text
    compacted = service.post(
        "/compact", json={"session_id": session_id, "strategy": "clear_tool_results"}
    )
    assert compacted.status_code == 201, compacted.text
    answer: dict[str, Any] = compacted.json()
    return answer


def test_a_hook_on_localhost_is_refused_at_the_call_naming_the_address_and_the_setting(
    client: TestClient, session_id: str
) -> None:
    """`localhost` is a name, so the session is created; the call resolves it, refuses the
    loopback address it resolves to, and the outcome names that address and the setting that
    would allow it."""
    before = _counted("refused_destination")
    answer = _compact_with_hook(client, session_id, url="http://localhost:9/hook")
    allow = "; hooks reach public addresses and the networks in CTX_HOOK_ALLOWED_NETWORKS only"
    assert answer["hooks"] in (
        [
            {
                "event": "pre_compact",
                "outcome": "failed_open",
                "detail": "refused destination: localhost resolves to 127.0.0.1, a loopback"
                f' address{allow} (["127.0.0.1/32"] allows it)',
                "reason": "refused_destination",
            }
        ],
        [  # where localhost resolves to ::1 as well
            {
                "event": "pre_compact",
                "outcome": "failed_open",
                "detail": "refused destination: localhost resolves to 127.0.0.1 and ::1,"
                f' loopback addresses{allow} (["127.0.0.1/32"] allows it)',
                "reason": "refused_destination",
            }
        ],
    )
    assert answer["applied"] is True
    assert _counted("refused_destination") == before + 1


def test_a_hook_answering_after_the_deadline_fails_with_the_deadline(
    hooked: TestClient, session_id: str
) -> None:
    release = threading.Event()

    def late(handler: BaseHTTPRequestHandler) -> None:
        release.wait(timeout=30)
        json_answer(200)(handler)

    before = _counted("deadline")
    with serving(late) as (url, served):
        answer = _compact_with_hook(hooked, session_id, url=url)
        release.set()
    assert answer["hooks"] == [
        {
            "event": "pre_compact",
            "outcome": "failed_open",
            "detail": "no whole answer within the 0.5 s deadline",
            "reason": "deadline",
        }
    ]
    assert (len(served.received), answer["applied"]) == (1, True)
    assert _counted("deadline") == before + 1


def test_a_hook_answering_500_fails_with_the_status(hooked: TestClient, session_id: str) -> None:
    before = _counted("status")
    with serving(json_answer(500, b'{"error": "boom"}')) as (url, _):
        answer = _compact_with_hook(hooked, session_id, url=url)
    assert answer["hooks"] == [
        {
            "event": "pre_compact",
            "outcome": "failed_open",
            "detail": "the hook answered HTTP 500",
            "reason": "status",
        }
    ]
    assert _counted("status") == before + 1


def test_a_hook_answering_more_than_the_cap_fails_with_the_limit(
    hooked: TestClient, session_id: str
) -> None:
    oversized = b'{"notes": ["' + b"x" * MAX_ANSWER_BYTES + b'"]}'
    before = _counted("answer_too_large")
    with serving(json_answer(200, oversized)) as (url, _):
        answer = _compact_with_hook(hooked, session_id, url=url)
    assert answer["hooks"] == [
        {
            "event": "pre_compact",
            "outcome": "failed_open",
            "detail": "the answer exceeded 1024 bytes, the limit",
            "reason": "answer_too_large",
        }
    ]
    assert _counted("answer_too_large") == before + 1


@pytest.mark.parametrize(
    "body",
    [b"<html>502 Bad Gateway</html>", b'["veto"]', b'"ok"', b"{broken"],
    ids=["html", "array", "string", "broken"],
)
def test_a_hook_answer_that_is_not_a_json_object_fails_closed_when_the_session_says_so(
    hooked: TestClient, session_id: str, body: bytes
) -> None:
    """A proxy's error page in a 200 is not the hook's consent: with `fail_closed` the
    compaction does not go ahead."""
    before = REGISTRY.get_sample_value(
        "contextd_hook_calls_total",
        {"event": "pre_compact", "outcome": "failed_closed", "reason": "answer_not_json"},
    )
    with serving(json_answer(200, body)) as (url, served):
        created = hooked.post(
            "/sessions",
            json={
                "session_id": session_id,
                "hooks": {"pre_compact": url, "failure_policy": "fail_closed"},
            },
        )
        assert created.status_code == 201, created.text
        items = load_trajectory(TRAJECTORIES[4])
        hooked.post(f"/sessions/{session_id}/items", json={"items": items}).raise_for_status()
        compacted = hooked.post(
            "/compact", json={"session_id": session_id, "strategy": "clear_tool_results"}
        )
    detail = (
        'the hook\'s answer is not a JSON object; an empty answer or one such as {"veto": false} is'
    )
    assert (compacted.status_code, compacted.json(), len(served.received)) == (
        409,
        {
            "error": {
                "code": "conflict",
                "message": f"the pre_compact hook stopped the compaction (failed_closed: {detail})",
                "details": {
                    "hooks": [
                        {
                            "event": "pre_compact",
                            "outcome": "failed_closed",
                            "detail": detail,
                            "reason": "answer_not_json",
                        }
                    ]
                },
            }
        },
        1,
    )
    after = REGISTRY.get_sample_value(
        "contextd_hook_calls_total",
        {"event": "pre_compact", "outcome": "failed_closed", "reason": "answer_not_json"},
    )
    assert (after or 0) == (before or 0) + 1


def test_an_empty_hook_answer_accepts(hooked: TestClient, session_id: str) -> None:
    with serving(json_answer(204, b"")) as (url, _):
        answer = _compact_with_hook(hooked, session_id, url=url)
    assert (answer["applied"], [hook["outcome"] for hook in answer["hooks"]]) == (
        True,
        ["accepted"],
    )
