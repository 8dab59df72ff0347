"""Faults with real processes on loopback: a server killed with SIGKILL in the middle of appends,
a database that goes away and comes back (through a TCP proxy, never the shared cluster), and
a hook endpoint that does not answer in time."""

from __future__ import annotations

import itertools
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
