"""Faults with real processes on loopback: a server killed with SIGKILL in the middle of appends,
a database that goes away and comes back, or stalls (through a TCP proxy, never the shared
cluster), and a hook endpoint that does not answer in time."""

from __future__ import annotations

import http.client
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from tests.builders import tool_call, tool_output, user_msg
from tests.e2e.servers import Server, SlowHook, TcpProxy, read_log, running, with_port


def _marker(item: dict[str, Any]) -> str:
    text: str = item["content"][0]["text"]
    return text


@dataclass
class Batch:
    session_id: str
    key: str
    markers: list[str]
    seqs: list[int] = field(default_factory=list)


@dataclass
class AppendLoad:
    """Workers appending marked batches; each batch is acknowledged, refused or in doubt."""

    base: str
    sessions: list[str]
    acknowledged: list[Batch] = field(default_factory=list)
    in_doubt: list[Batch] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def worker(self, number: int) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                session_id = self.sessions[(number + n) % len(self.sessions)]
                key = f"w{number}-b{n}"
                batch = Batch(session_id, key, [f"{key}-i{k}" for k in range(1 + (n + number) % 4)])
                try:
                    response = client.post(
                        f"/sessions/{session_id}/items",
                        json={
                            "items": [user_msg(marker) for marker in batch.markers],
                            "idempotency_key": key,
                        },
                    )
                except httpx.TransportError:
                    with self.lock:
                        self.in_doubt.append(batch)
                    return  # the server is gone
                with self.lock:
                    if response.status_code == 201:
                        batch.seqs = [item["seq"] for item in response.json()["items"]]
                        self.acknowledged.append(batch)
                    else:
                        self.refused.append((response.status_code, response.text))


def test_kill_9_during_appends_loses_no_acknowledged_item_and_duplicates_none(
    postgres_url: str,
) -> None:
    tag = uuid.uuid4().hex[:8]
    sessions = [f"kill9-{tag}-{n}" for n in range(3)]
    server = Server(postgres_url)
    try:
        server.start()
        with httpx.Client(base_url=server.base, timeout=10) as client:
            for session_id in sessions:
                assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
        load = AppendLoad(server.base, sessions)
        workers = [threading.Thread(target=load.worker, args=(n,)) for n in range(4)]
        for thread in workers:
            thread.start()
        try:
            for _ in range(200):  # until enough batches are acknowledged (bounded)
                with load.lock:
                    if len(load.acknowledged) >= 40:
                        break
                time.sleep(0.05)
            server.kill()  # SIGKILL while the workers are still appending
        finally:
            load.stop.set()
            for thread in workers:
                thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in workers)
        assert load.refused == [], load.refused
        assert len(load.acknowledged) >= 10

        server.start()  # same port, same database
        with httpx.Client(base_url=server.base, timeout=10) as client:
            # Batches cut by the kill are retried with their idempotency key: exactly once.
            for batch in load.in_doubt:
                retried = client.post(
                    f"/sessions/{batch.session_id}/items",
                    json={
                        "items": [user_msg(marker) for marker in batch.markers],
                        "idempotency_key": batch.key,
                    },
                )
                assert retried.status_code in (200, 201), retried.text
                batch.seqs = [item["seq"] for item in retried.json()["items"]]

            sent = load.acknowledged + load.in_doubt
            logged_markers: list[str] = []
            for session_id in sessions:
                log = read_log(client, session_id)
                seqs = [entry["seq"] for entry in log]
                last_seq = client.get(f"/sessions/{session_id}").json()["last_seq"]
                assert seqs == list(range(1, last_seq + 1)), "seqs are not dense 1..last_seq"
                by_seq = {entry["seq"]: _marker(entry["item"]) for entry in log}
                logged_markers.extend(by_seq.values())
                for batch in sent:
                    if batch.session_id == session_id:
                        assert [by_seq.get(seq) for seq in batch.seqs] == batch.markers, batch
            every_marker = [marker for batch in sent for marker in batch.markers]
            assert len(logged_markers) == len(set(logged_markers)), "an item was logged twice"
            assert sorted(logged_markers) == sorted(every_marker)
    finally:
        server.stop()


@dataclass
class Outcome:
    what: str
    status: int | None
    body: Any = None
    retry_after: str | None = None
    error: str | None = None


def test_database_outage_answers_503_then_recovers_without_restart(postgres_url: str) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    session_id = f"outage-{uuid.uuid4().hex[:8]}"
    outcomes: list[Outcome] = []
    stop = threading.Event()

    def stream(base: str) -> None:
        with httpx.Client(base_url=base, timeout=10) as client:
            for n in itertools.count():
                if stop.is_set():
                    return
                what = "append" if n % 2 else "get"
                try:
                    if what == "append":
                        response = client.post(
                            f"/sessions/{session_id}/items",
                            json={"items": [user_msg(f"stream {n}")]},
                        )
                    else:
                        response = client.get(f"/sessions/{session_id}")
                except httpx.HTTPError as exc:  # includes the client timeout
                    outcomes.append(Outcome(what, None, error=repr(exc)))
                    continue
                outcomes.append(
                    Outcome(
                        what,
                        response.status_code,
                        response.json(),
                        response.headers.get("retry-after"),
                    )
                )
                time.sleep(0.02)

    try:
        with (
            running(
                with_port(postgres_url, proxy.port),
                CTX_DB_TIMEOUT_SECONDS="2",
                CTX_RETRY_AFTER_SECONDS="3",
            ) as server,
            httpx.Client(base_url=server.base, timeout=10) as client,
        ):
            assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
            streamer = threading.Thread(target=stream, args=(server.base,))
            streamer.start()
            try:
                time.sleep(0.5)
                proxy.stop()  # the database "stops": listener and every connection closed
                for _ in range(100):
                    if sum(o.status == 503 for o in outcomes) >= 6:
                        break
                    time.sleep(0.1)
                ready = client.get("/readyz")
                assert ready.status_code == 503
                assert ready.json()["error"]["code"] == "database_unavailable"
                outage_marker = len(outcomes)

                proxy.start()  # the database is back on the same port
                for _ in range(30):
                    if client.get(f"/sessions/{session_id}").status_code == 200:
                        break
                    time.sleep(0.5)
                else:
                    raise AssertionError("the service did not recover by itself")
                appended = client.post(
                    f"/sessions/{session_id}/items", json={"items": [user_msg("after")]}
                )
                assert appended.status_code == 201, appended.text
                assert client.get("/readyz").status_code == 200
                time.sleep(0.3)
            finally:
                stop.set()
                streamer.join(timeout=30)
            assert not streamer.is_alive()
            recovered = outcomes[outage_marker:]
    finally:
        proxy.stop()

    assert [o for o in outcomes if o.error is not None] == []  # nothing hung or broke off
    assert {o.status for o in outcomes} <= {200, 201, 503}, [
        o for o in outcomes if o.status not in (200, 201, 503)
    ]
    unavailable = [o for o in outcomes if o.status == 503]
    assert len(unavailable) >= 6
    for outcome in unavailable:
        assert outcome.retry_after == "3"
        assert outcome.body["error"]["code"] == "database_unavailable"
        assert set(outcome.body["error"]) == {"code", "message", "details"}
    assert any(o.status in (200, 201) for o in recovered[-5:]), recovered[-5:]


def test_slow_pre_compact_hook_cannot_stall_compaction(postgres_url: str) -> None:
    session_id = f"slowhook-{uuid.uuid4().hex[:8]}"
    with (
        SlowHook(delay=5) as hook,
        running(
            postgres_url,
            CTX_HOOK_TIMEOUT_SECONDS="0.5",
            CTX_HOOK_ALLOWED_NETWORKS='["127.0.0.0/8"]',  # the hook listens on loopback
        ) as server,
        httpx.Client(base_url=server.base, timeout=4) as client,
    ):
        created = client.post(
            "/sessions",
            json={"session_id": session_id, "hooks": {"pre_compact": hook.url}},
        )
        assert created.status_code == 201, created.text
        appended = client.post(
            f"/sessions/{session_id}/items",
            json={
                "items": [
                    user_msg("list the files"),
                    tool_call("c1", "shell", '{"cmd": "ls"}'),
                    tool_output("c1", "a.py\nb.py\n" * 200),
                ]
            },
        )
        assert appended.status_code == 201, appended.text
        # Raises httpx.ReadTimeout (failing the test) if the hook stalls it past 4 s.
        compacted = client.post(
            "/compact",
            json={
                "session_id": session_id,
                "strategy": "clear_tool_results",
                "params": {"keep_recent": 0},
            },
        )
        assert compacted.status_code in (200, 201), compacted.text
        body = compacted.json()
        assert body["hooks"][0]["event"] == "pre_compact"
        assert body["hooks"][0]["outcome"] == "failed_open"
        assert body["compaction_id"] is not None


@dataclass
class Timed:
    what: str
    sent_at: float
    answered_at: float
    status: int | None
    body: Any = None
    retry_after: str | None = None
    error: str | None = None


def _timed(client: httpx.Client, what: str, method: str, path: str, **kwargs: Any) -> Timed:
    sent_at = time.monotonic()
    try:
        response = client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:  # includes the client's own timeout
        return Timed(what, sent_at, time.monotonic(), None, error=repr(exc))
    body = response.json() if response.content else None
    return Timed(
        what,
        sent_at,
        time.monotonic(),
        response.status_code,
        body,
        response.headers.get("retry-after"),
    )


DB_TIMEOUT = 1.0
CLIENT_TIMEOUT = 10.0
"""The clients' own timeout during a stall: many times the database timeout, so that only a
hang fails it (each wait of a request on a stalled database ends within 2 s here)."""


def test_a_stalled_database_answers_503_in_time_while_liveness_answers_throughout(
    postgres_url: str,
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    tag = uuid.uuid4().hex[:8]
    clients = 60  # more than the server's 40 worker threads and its 20 connections
    sessions = [f"stall-{tag}-{n}" for n in range(clients)]
    load: list[Timed] = []
    probes: list[Timed] = []
    probing = threading.Event()
    go = threading.Event()

    def requests(number: int, base: str) -> None:
        session_id = sessions[number]
        with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT) as client:
            go.wait()
            for n in range(2):  # the second mostly on a new connection to the stalled database
                match (number + n) % 3:
                    case 0:
                        load.append(_timed(client, "get", "GET", f"/sessions/{session_id}"))
                    case 1:
                        items = {"items": [user_msg(f"during the stall {n}")]}
                        path = f"/sessions/{session_id}/items"
                        load.append(_timed(client, "append", "POST", path, json=items))
                    case _:
                        body = {"session_id": session_id}
                        load.append(_timed(client, "assemble", "POST", "/assemble", json=body))

    def probe(base: str) -> None:
        with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT) as client:
            while probing.is_set():
                probes.append(_timed(client, "healthz", "GET", "/healthz"))
                time.sleep(0.05)

    try:
        with (
            running(
                with_port(postgres_url, proxy.port),
                CTX_DB_TIMEOUT_SECONDS=str(DB_TIMEOUT),
                CTX_RETRY_AFTER_SECONDS="3",
            ) as server,
            httpx.Client(base_url=server.base, timeout=CLIENT_TIMEOUT) as client,
        ):
            for session_id in sessions:
                created = client.post("/sessions", json={"session_id": session_id})
                assert created.status_code == 201, created.text
            proxy.stall()  # every pooled connection open, nothing forwarded
            probing.set()
            prober = threading.Thread(target=probe, args=(server.base,))
            prober.start()
            workers = [
                threading.Thread(target=requests, args=(n, server.base)) for n in range(clients)
            ]
            for thread in workers:
                thread.start()
            go.set()
            # Every worker thread of the server is taken by then; none is answered yet (the
            # earliest answer is a checkout giving up after the database timeout).
            time.sleep(DB_TIMEOUT / 2)
            all_waiting_at = time.monotonic()
            ready_during = _timed(client, "readyz", "GET", "/readyz")
            for thread in workers:
                thread.join(timeout=4 * CLIENT_TIMEOUT)
            assert not any(thread.is_alive() for thread in workers)

            proxy.resume()
            for _ in range(40):
                recovered = _timed(client, "get", "GET", f"/sessions/{sessions[0]}")
                if recovered.status == 200:
                    break
                time.sleep(0.25)
            ready_after = _timed(client, "readyz", "GET", "/readyz")
            probing.clear()
            prober.join(timeout=2 * CLIENT_TIMEOUT)
    finally:
        probing.clear()
        proxy.resume()
        proxy.stop()

    assert [t for t in load if t.error is not None] == []  # every request answered, in full
    assert {t.status for t in load} == {503}, [t for t in load if t.status != 503]
    for answer in load:
        assert answer.retry_after == "3"
        assert answer.body["error"]["code"] == "database_unavailable"
        assert set(answer.body["error"]) == {"code", "message", "details"}
    assert (ready_during.status, ready_during.body["error"]["code"]) == (
        503,
        "database_unavailable",
    )
    assert ready_during.retry_after == "3"
    assert (recovered.status, ready_after.status) == (200, 200)
    assert probes
    assert [p for p in probes if (p.status, p.body) != (200, {"status": "ok"})] == []
    # Liveness answers while every worker thread is taken by a request waiting on the database
    # (a probe every 50 ms for at least half a second). A liveness check run in the threadpool
    # would wait for a thread, and the prober with it.
    first_answer_at = min(t.answered_at for t in load)
    while_all_wait = [
        p for p in probes if all_waiting_at <= p.sent_at and p.answered_at < first_answer_at
    ]
    assert len(while_all_wait) >= 5, (all_waiting_at, first_answer_at, probes)


def _metric(base: str, sample: str) -> float:
    """One sample of the server's /metrics (0 when absent), read on a connection of its own."""
    text = httpx.get(f"{base}/metrics", timeout=CLIENT_TIMEOUT).text
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _answer(connection: socket.socket) -> tuple[int, Any]:
    """The status and JSON body of the next response on a raw connection."""
    response = http.client.HTTPResponse(connection)
    response.begin()
    return response.status, json.loads(response.read())


def test_a_rollback_stalled_after_the_answer_cuts_neither_the_answer_nor_the_connection(
    postgres_url: str,
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    session_id = f"rollback-{uuid.uuid4().hex[:8]}"
    failed_closes = 'contextd_after_answer_failures_total{step="close_session"}'
    try:
        with running(
            with_port(postgres_url, proxy.port), CTX_DB_TIMEOUT_SECONDS=str(DB_TIMEOUT)
        ) as server:
            created = httpx.post(f"{server.base}/sessions", json={"session_id": session_id})
            assert created.status_code == 201, created.text
            with socket.create_connection(("127.0.0.1", server.port), CLIENT_TIMEOUT) as raw:
                # A read ends its transaction after the answer: that rollback never returns.
                proxy.stall_at(b"ROLLBACK")
                raw.sendall(f"GET /sessions/{session_id} HTTP/1.1\r\nhost: t\r\n\r\n".encode())
                first = _answer(raw)
                raw.sendall(b"GET /healthz HTTP/1.1\r\nhost: t\r\n")  # under way meanwhile
                for _ in range(int(CLIENT_TIMEOUT / 0.1)):
                    if _metric(server.base, failed_closes) >= 1:
                        break  # the server gave the rollback up
                    time.sleep(0.1)
                raw.sendall(b"\r\n")
                second = _answer(raw)
            closes_failed = _metric(server.base, failed_closes)
    finally:
        proxy.resume()
        proxy.stop()
    assert (first[0], first[1]["session_id"]) == (200, session_id)
    assert second == (200, {"status": "ok"})
    assert closes_failed == 1


def test_a_plan_write_stalled_after_the_answer_is_counted_and_the_connection_answers_on(
    postgres_url: str,
) -> None:
    database = make_url(postgres_url)
    proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
    proxy.start()
    session_id = f"planstall-{uuid.uuid4().hex[:8]}"
    failed_writes = "contextd_plan_store_failures_total"
    try:
        with (
            running(
                with_port(postgres_url, proxy.port), CTX_DB_TIMEOUT_SECONDS=str(DB_TIMEOUT)
            ) as server,
            httpx.Client(base_url=server.base, timeout=CLIENT_TIMEOUT) as client,
        ):
            assert client.post("/sessions", json={"session_id": session_id}).status_code == 201
            appended = client.post(
                f"/sessions/{session_id}/items", json={"items": [user_msg("hello")]}
            )
            assert appended.status_code == 201, appended.text
            before = _metric(server.base, failed_writes)
            proxy.stall_at(b"INSERT INTO assemblies")  # the plan, written after the answer
            made = client.post("/assemble", json={"session_id": session_id})
            # The same connection: the server reads this once the plan write has given up.
            after = client.get("/healthz")
            failures = _metric(server.base, failed_writes) - before
            proxy.resume()
            stored = client.get(f"/assemblies/{made.json()['assembly_id']}")
    finally:
        proxy.resume()
        proxy.stop()
    assert made.status_code == 201, made.text
    assert (after.status_code, after.json()) == (200, {"status": "ok"})
    assert failures == 1
    # In doubt, as the write was: stored as answered if it reached the database after all (it
    # autocommits), else not found; never anything else.
    if stored.status_code == 200:
        assert stored.json()["response"] == made.json()
    else:
        assert (stored.status_code, stored.json()["error"]["code"]) == (404, "not_found")
