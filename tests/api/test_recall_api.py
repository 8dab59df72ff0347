"""Recall over HTTP on PostgreSQL: windows exact to the line and the token, paging that gives
the text back byte for byte, searches of one fact and of a range, and the refusals (404, 422)
that change nothing."""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import make_url

from app.main import create_app
from app.settings import Settings
from app.tokens import token_counter
from tests.builders import tool_call, tool_output, user_msg
from tests.conftest import _admin_conninfo

count = token_counter("o200k_base")

LISTING = "".join(
    f"src/pkg/module_{n:03d}.py: def handler_{n}(event): return {n * 7}\n" for n in range(300)
)


def _session(client: TestClient, session_id: str, items: list[dict[str, Any]]) -> None:
    assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items})
    assert appended.status_code == 201, appended.text


def _recall(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/sessions/{session_id}/recall", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _page_through(
    client: TestClient, session_id: str, seq: int, **bounds: Any
) -> list[dict[str, Any]]:
    pages = [_recall(client, session_id, seq=seq, **bounds)]
    while pages[-1]["next_from_line"] is not None:
        pages.append(
            _recall(
                client,
                session_id,
                seq=seq,
                from_line=pages[-1]["next_from_line"],
                from_char=pages[-1]["next_from_char"],
                **bounds,
            )
        )
    return pages


def test_a_window_is_whole_lines_within_its_bounds_and_exactly_as_logged(
    client: TestClient, session_id: str
) -> None:
    _session(client, session_id, [user_msg("list"), tool_call("c1"), tool_output("c1", LISTING)])
    window = _recall(client, session_id, seq=3, from_line=11, max_lines=5, max_tokens=2000)
    lines = LISTING.splitlines(keepends=True)
    text = "".join(lines[10:15])
    assert window == {
        "seq": 3,
        "type": "function_call_output",
        "text": text,
        "from_line": 11,
        "from_char": 0,
        "to_line": 15,
        "total_lines": 300,
        "tokens": count(text),
        "next_from_line": 16,
        "next_from_char": 0,
        "matches": [],
        "from_seq": None,
        "to_seq": None,
        "next_from_seq": None,
        "stopped_by": None,
        "scanned_bytes": None,
        "max_scan_bytes": None,
        "max_scan_seconds": None,
        "max_lines": 5,
        "max_tokens": 2000,
        "max_matches": 50,
        "tool_output": f"fact seq 3 (function_call_output), lines 11–15 of 300, {count(text)}"
        f" tokens; more: recall seq 3 from_line 16\n{text}",
    }
    # The token bound cuts before the line that would pass it.
    tight = _recall(client, session_id, seq=3, max_tokens=100)
    assert tight["tokens"] <= 100 < count(tight["text"] + lines[tight["to_line"]])
    assert tight["text"] == "".join(lines[: tight["to_line"]])


def test_paging_gives_the_text_back_byte_for_byte(client: TestClient, session_id: str) -> None:
    _session(client, session_id, [user_msg("list"), tool_call("c1"), tool_output("c1", LISTING)])
    pages = _page_through(client, session_id, 3, max_tokens=700)
    assert "".join(page["text"] for page in pages) == LISTING
    assert all(page["tokens"] == count(page["text"]) <= 700 for page in pages)
    assert [page["from_line"] for page in pages[1:]] == [page["to_line"] + 1 for page in pages[:-1]]
    assert pages[-1]["to_line"] == 300
    assert pages[-1]["tool_output"].splitlines()[0].endswith("the end of the fact")


def test_a_line_longer_than_the_token_bound_is_paged_inside(
    client: TestClient, session_id: str
) -> None:
    minified = (
        '{"rows": [' + ", ".join(f'{{"id": {n}, "name": "row_{n}"}}' for n in range(400)) + "]}"
    )
    text = f"first line\n{minified}\nlast line"
    _session(client, session_id, [user_msg("dump"), tool_call("c1"), tool_output("c1", text)])
    pages = _page_through(client, session_id, 3, max_tokens=300)
    assert "".join(page["text"] for page in pages) == text
    assert all(page["tokens"] <= 300 for page in pages)
    inside = [page for page in pages if page["from_char"]]
    assert inside
    assert all(page["from_line"] == 2 for page in inside)
    assert pages[0]["text"] == "first line\n"
    assert pages[-1]["to_line"] == 3


def test_oversized_bounds_are_capped_and_the_cap_stated(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, recall_max_tokens=500, recall_max_lines=40)
    with TestClient(create_app(settings)) as service:
        _session(service, session_id, [user_msg("x"), tool_call("c1"), tool_output("c1", LISTING)])
        window = _recall(service, session_id, seq=3, max_lines=10**6, max_tokens=10**6)
        assert (window["max_lines"], window["max_tokens"]) == (40, 500)
        assert window["tokens"] <= 500
        assert window["to_line"] <= 40


def test_a_search_lists_matching_lines_with_their_seq_and_line(
    client: TestClient, session_id: str
) -> None:
    _session(
        client,
        session_id,
        [
            user_msg("run the tests"),
            tool_call("c1", arguments='{"cmd": "pytest"}'),
            tool_output("c1", "collected 3 items\nFAILED tests/test_io.py::test_read - KeyError\n"),
            tool_call("c2", arguments='{"cmd": "cat src/io.py"}'),
            tool_output("c2", "def read(path):\n    return CACHE[path]\n"),
        ],
    )
    found = _recall(client, session_id, from_seq=1, to_seq=5, pattern=r"KeyError|CACHE\[")
    assert found["matches"] == [
        {"seq": 3, "line": 2, "text": "FAILED tests/test_io.py::test_read - KeyError"},
        {"seq": 5, "line": 2, "text": "    return CACHE[path]"},
    ]
    assert (found["from_seq"], found["to_seq"], found["next_from_seq"]) == (1, 5, None)
    assert found["tool_output"] == (
        "2 matching lines for 'KeyError|CACHE\\\\[' in fact seqs 1–5:\n"
        "seq 3 line 2: FAILED tests/test_io.py::test_read - KeyError\n"
        "seq 5 line 2:     return CACHE[path]"
    )
    # `seq` with a pattern searches that one fact; `^` anchors at line starts.
    one = _recall(client, session_id, seq=5, pattern=r"^\s+return")
    assert one["matches"] == [{"seq": 5, "line": 2, "text": "    return CACHE[path]"}]
    assert one["text"] is None
    assert one["type"] == "function_call_output"
    # A range past the log ends at its last seq; the match cap says where to go on.
    capped = _recall(client, session_id, from_seq=1, to_seq=99, pattern="e", max_matches=2)
    assert len(capped["matches"]) == 2
    assert capped["to_seq"] == 5
    assert capped["next_from_seq"] is not None
    assert "search again from_seq" in capped["tool_output"]


def test_a_pathological_pattern_on_a_huge_output_answers(
    client: TestClient, session_id: str
) -> None:
    # Catastrophic for a backtracking engine: nested quantifiers that never match, on an item
    # at the 4 MiB limit.
    huge = "a" * (4 * 1024 * 1024 - 100) + "!"
    _session(client, session_id, [user_msg("x"), tool_call("c1"), tool_output("c1", huge)])
    found = _recall(client, session_id, seq=3, pattern="(a+)+$")
    assert found["matches"] == []
    empty = _recall(client, session_id, seq=3, pattern="x*", max_matches=5)
    assert empty["matches"] == [{"seq": 3, "line": 1, "text": "a" * 400 + "…"}]


def test_refusals_change_nothing(postgres_url: str, session_id: str) -> None:
    settings = Settings(database_url=postgres_url, api_keys=["alpha:key-a", "beta:key-b"])
    alpha, beta = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
    with TestClient(create_app(settings)) as service:
        assert (
            service.post("/sessions", json={"session_id": session_id}, headers=alpha).status_code
            == 201
        )
        service.post(
            f"/sessions/{session_id}/items", json={"items": [user_msg("secret")]}, headers=alpha
        )
        path = f"/sessions/{session_id}/recall"
        cases = [
            (beta, {"seq": 1}, 404, "not_found"),
            (alpha, {"seq": 2}, 409, "seq_past_log"),
            (alpha, {"from_seq": 5, "pattern": "x"}, 409, "seq_past_log"),
            (alpha, {"seq": 1, "from_line": 3}, 409, "window_past_text"),
            (alpha, {"seq": 1, "pattern": "(unclosed"}, 422, "invalid_pattern"),
            (alpha, {"seq": 1, "pattern": r"(a)\1"}, 422, "invalid_pattern"),
            (alpha, {"from_seq": 3, "to_seq": 2, "pattern": "x"}, 422, "seq_range_reversed"),
            (alpha, {"from_seq": 1}, 422, "validation_error"),
            (alpha, {}, 422, "validation_error"),
            (alpha, {"seq": 1, "max_tokens": 3}, 422, "validation_error"),
        ]
        for headers, body, status, code in cases:
            answer = service.post(path, json=body, headers=headers)
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), body
        reason = service.post(path, json={"seq": 1, "pattern": "(unclosed"}, headers=alpha).json()
        assert reason["error"]["message"] == "invalid pattern: missing ): (unclosed"
        assert service.get(f"/sessions/{session_id}", headers=alpha).json()["last_seq"] == 1
        # A recall itself writes nothing either.
        ok = service.post(path, json={"seq": 1}, headers=alpha)
        assert ok.json()["text"] == "secret"
        assert service.get(f"/sessions/{session_id}", headers=alpha).json()["last_seq"] == 1


AUDIT_PATTERN = r"x[\s\S]*a[\s\S]{900}"
"""The audit's pattern: its DFA does not fit RE2's memory, so RE2 runs it on its slow engine,
and every match spans to the end of the text."""


def _audit_output() -> str:
    """3.8 MB: 47,000 lines, each `x` and 79 random `a`/`b`."""
    rng = random.Random(42)
    return "\n".join("x" + "".join(rng.choices("ab", k=79)) for _ in range(47_000))


def test_a_search_the_slow_engine_runs_stops_at_its_cpu_bound_and_goes_on_from_its_line(
    postgres_url: str, session_id: str
) -> None:
    """Each RE2 call searches one block at most, so the CPU bound stops the search; the answer
    says which bound stopped it and the line to go on from, and going on from there makes
    progress."""
    settings = Settings(database_url=postgres_url, recall_max_scan_seconds=0.2)
    with TestClient(create_app(settings)) as client:
        _session(
            client, session_id, [user_msg("x"), tool_call("c1"), tool_output("c1", _audit_output())]
        )
        first = _recall(client, session_id, seq=3, pattern=AUDIT_PATTERN, max_matches=200)
        assert (first["stopped_by"], first["next_from_seq"], first["max_scan_seconds"]) == (
            "max_scan_seconds",
            3,
            0.2,
        )
        assert first["next_from_line"] > max([1, *(m["line"] for m in first["matches"])])
        assert "stopped early at the CPU time a search may take" in first["tool_output"]
        assert f"from_line {first['next_from_line']}" in first["tool_output"]
        again = _recall(
            client,
            session_id,
            seq=3,
            pattern=AUDIT_PATTERN,
            max_matches=200,
            from_line=first["next_from_line"],
        )
        assert again["next_from_line"] > first["next_from_line"]
        assert all(m["line"] >= first["next_from_line"] for m in again["matches"])


def test_a_search_holds_no_transaction_while_its_pattern_runs(
    postgres_url: str, session_id: str
) -> None:
    """The audit saw every pooled connection idle in transaction under slow searches, and other
    tenants answered 503. The facts are read, the transaction ended, then the pattern runs.
    The service's connections carry an application name of their own, so that only they are
    watched (the test database is shared by the run)."""
    watched = f"contextd-recall-{uuid.uuid4().hex[:8]}"
    url = make_url(postgres_url).update_query_dict({"application_name": watched})
    settings = Settings(database_url=url.render_as_string(hide_password=False))
    with TestClient(create_app(settings)) as client:
        items = [user_msg("x"), tool_call("c1"), tool_output("c1", _audit_output())]
        _session(client, session_id, items)
        done = threading.Event()
        answers: list[int] = []

        def search() -> None:
            body = {"seq": 3, "pattern": AUDIT_PATTERN, "max_matches": 200}
            answers.append(client.post(f"/sessions/{session_id}/recall", json=body).status_code)
            done.set()

        states: list[str] = []
        worker = threading.Thread(target=search)
        with psycopg.connect(_admin_conninfo(postgres_url), autocommit=True) as watcher:
            worker.start()
            while not done.is_set():
                states += [
                    state
                    for (state,) in watcher.execute(
                        "SELECT state FROM pg_stat_activity WHERE application_name = %s",
                        (watched,),
                    )
                ]
                done.wait(0.02)
        worker.join()
    assert answers == [200]
    assert len(states) >= 8  # watched while the search ran
    # The read of the facts is a transaction of its own, and a sample may catch it between two
    # statements; the pattern's run, most of the search, must find none open (holding the
    # transaction through it, every sample did).
    assert states.count("idle in transaction") <= len(states) // 4, states


def test_a_tenant_searching_at_its_limit_gets_429_and_another_tenant_is_served(
    postgres_url: str, session_id: str
) -> None:
    settings = Settings(
        database_url=postgres_url,
        api_keys=["alpha:key-alpha", "beta:key-beta"],
        recall_max_concurrent_per_tenant=1,
    )
    alpha, beta = {"Authorization": "Bearer key-alpha"}, {"Authorization": "Bearer key-beta"}
    slow = {"seq": 3, "pattern": AUDIT_PATTERN, "max_matches": 200}
    with TestClient(create_app(settings)) as client:
        for headers in (alpha, beta):
            client.post("/sessions", json={"session_id": session_id}, headers=headers)
            items = [user_msg("x"), tool_call("c1"), tool_output("c1", _audit_output())]
            appended = client.post(
                f"/sessions/{session_id}/items", json={"items": items}, headers=headers
            )
            assert appended.status_code == 201, appended.text
        answers: list[Any] = []

        def search() -> None:
            url = f"/sessions/{session_id}/recall"
            answers.append(client.post(url, json=slow, headers=alpha))

        # Three at once: one takes the tenant's one slot (a second of CPU), the others find it
        # taken.
        searches = [threading.Thread(target=search) for _ in range(3)]
        for thread in searches:
            thread.start()
        other = client.post(
            f"/sessions/{session_id}/recall", json={"seq": 3, "pattern": "^xab"}, headers=beta
        )
        for thread in searches:
            thread.join()
    assert sorted(answer.status_code for answer in answers) == [200, 429, 429]
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == str(settings.retry_after_seconds)
    assert refused.json()["error"]["code"] == "tenant_busy"
    assert "CTX_RECALL_MAX_CONCURRENT_PER_TENANT" in refused.json()["error"]["message"]
    assert other.status_code == 200
