"""Two real server processes on one PostgreSQL database behave as one service."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx

from tests.builders import tool_call, tool_output, user_msg
from tests.e2e.servers import read_log, running


def _text(entry: dict[str, Any]) -> str:
    text: str = entry["item"]["content"][0]["text"]
    return text


def test_two_replicas_share_sessions_logs_and_idempotency(postgres_url: str) -> None:
    session_id = f"replicas-{uuid.uuid4().hex[:8]}"
    with (
        running(postgres_url) as first,
        running(postgres_url) as second,
        httpx.Client(base_url=first.base, timeout=10) as a,
        httpx.Client(base_url=second.base, timeout=10) as b,
    ):
        assert first.port != second.port
        created = a.post("/sessions", json={"session_id": session_id, "model": "m"})
        assert created.status_code == 201, created.text
        seen_on_b = b.get(f"/sessions/{session_id}")
        assert seen_on_b.status_code == 200
        assert seen_on_b.json()["model"] == "m"
        # Creating it again on the other replica is the idempotent 200, not a second session.
        again = b.post("/sessions", json={"session_id": session_id, "model": "m"})
        assert (again.status_code, again.json()) == (200, created.json())

        # Alternate appends, each read back on the other replica.
        expected: list[str] = []
        for n in range(6):
            writer, reader = (b, a) if n % 2 == 0 else (a, b)
            texts = [f"alt-{n}-{k}" for k in range(1 + n % 3)]
            appended = writer.post(
                f"/sessions/{session_id}/items",
                json={"items": [user_msg(t) for t in texts], "expected_last_seq": len(expected)},
            )
            assert appended.status_code == 201, appended.text
            assert appended.json()["first_seq"] == len(expected) + 1
            expected.extend(texts)
            assert reader.get(f"/sessions/{session_id}").json()["last_seq"] == len(expected)
            assert [_text(e) for e in read_log(reader, session_id)] == expected

        # A stale expected_last_seq is refused on either replica, whoever wrote last.
        stale = a.post(
            f"/sessions/{session_id}/items",
            json={"items": [user_msg("stale")], "expected_last_seq": len(expected) - 1},
        )
        assert stale.status_code == 409
        assert stale.json()["error"]["details"] == {
            "expected": len(expected) - 1,
            "actual": len(expected),
        }

        # Concurrent appends from threads to both replicas.
        results: list[tuple[int, list[str], list[int]]] = []
        errors: list[str] = []
        lock = threading.Lock()

        def appender(base: str, worker: int) -> None:
            with httpx.Client(base_url=base, timeout=10) as client:
                for n in range(15):
                    texts = [f"con-{worker}-{n}-{k}" for k in range(1 + (n + worker) % 3)]
                    response = client.post(
                        f"/sessions/{session_id}/items",
                        json={"items": [user_msg(t) for t in texts]},
                    )
                    with lock:
                        if response.status_code != 201:
                            errors.append(f"{response.status_code} {response.text}")
                            continue
                        seqs = [item["seq"] for item in response.json()["items"]]
                        results.append((worker, texts, seqs))

        threads = [
            threading.Thread(target=appender, args=(server.base, n))
            for n, server in enumerate([first, second, first, second])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads)
        assert errors == []
        assert len(results) == 4 * 15

        for reader in (a, b):
            log = read_log(reader, session_id)
            seqs = [entry["seq"] for entry in log]
            total = len(expected) + sum(len(texts) for _, texts, _ in results)
            assert seqs == list(range(1, total + 1))
            assert reader.get(f"/sessions/{session_id}").json()["last_seq"] == total
            by_seq = {entry["seq"]: _text(entry) for entry in log}
            assert [by_seq[seq] for seq in range(1, len(expected) + 1)] == expected
            for _, texts, batch_seqs in results:
                # Batches are atomic and contiguous, in the order given.
                assert batch_seqs == list(range(batch_seqs[0], batch_seqs[0] + len(texts)))
                assert [by_seq[seq] for seq in batch_seqs] == texts
            # Each worker's batches keep their order in the log.
            for worker in range(4):
                firsts = [seqs[0] for w, _, seqs in results if w == worker]
                assert firsts == sorted(firsts)

        # An idempotency key used on one replica replays on the other: 200, same body, no write.
        batch = {
            "items": [tool_call("c1", "shell", "{}"), tool_output("c1", "ok")],
            "idempotency_key": "turn-42",
        }
        original = a.post(f"/sessions/{session_id}/items", json=batch)
        assert original.status_code == 201, original.text
        replayed = b.post(f"/sessions/{session_id}/items", json=batch)
        assert (replayed.status_code, replayed.json()) == (200, original.json())
        last_seq = original.json()["last_seq"]
        assert a.get(f"/sessions/{session_id}").json()["last_seq"] == last_seq
        assert b.get(f"/sessions/{session_id}").json()["last_seq"] == last_seq
        assert len(read_log(a, session_id)) == last_seq

        # Concurrent replays of one new key on both replicas: one write, the same answer.
        fresh = {"items": [user_msg("once")], "idempotency_key": "turn-43"}
        answers: list[httpx.Response] = []

        def replay(base: str) -> None:
            with httpx.Client(base_url=base, timeout=10) as client:
                answer = client.post(f"/sessions/{session_id}/items", json=fresh)
                with lock:
                    answers.append(answer)

        racers = [threading.Thread(target=replay, args=(s.base,)) for s in (first, second) * 2]
        for thread in racers:
            thread.start()
        for thread in racers:
            thread.join(timeout=30)
        assert sorted(r.status_code for r in answers) == [200, 200, 200, 201], [
            (r.status_code, r.text) for r in answers
        ]
        assert len({r.content for r in answers}) == 1
        assert b.get(f"/sessions/{session_id}").json()["last_seq"] == last_seq + 1


def test_concurrent_usage_reports_on_both_replicas_each_calibrate_once(postgres_url: str) -> None:
    """Reports of one session update its calibration one after another (the session row
    lock): none is lost, whichever replica takes it, and an assembly reported on both counts
    once."""
    session_id = f"calibrated-{uuid.uuid4().hex[:8]}"
    with (
        running(postgres_url) as first,
        running(postgres_url) as second,
        httpx.Client(base_url=first.base, timeout=10) as a,
    ):
        created = a.post("/sessions", json={"session_id": session_id, "model": "claude-opus-4-1"})
        assert created.status_code == 201, created.text
        assemblies = []
        for n in range(8):
            appended = a.post(
                f"/sessions/{session_id}/items",
                json={"items": [tool_call(f"c{n}"), tool_output(f"c{n}", f"step {n} " * 50)]},
            )
            assert appended.status_code == 201, appended.text
            assembled = a.post("/assemble", json={"session_id": session_id})
            assert assembled.status_code == 201, assembled.text
            assemblies.append(assembled.json())
        statuses: list[int] = []
        lock = threading.Lock()

        def report(base: str, assembly: dict[str, Any]) -> None:
            with httpx.Client(base_url=base, timeout=10) as client:
                answer = client.post(
                    f"/sessions/{session_id}/usage",
                    json={
                        "assembly_id": assembly["assembly_id"],
                        "input_tokens": round(assembly["total_tokens"] * 1.5),
                    },
                )
                with lock:
                    statuses.append(answer.status_code)

        # Every assembly reported twice, once to each replica, all at once.
        reporters = [
            threading.Thread(target=report, args=(server.base, assembly))
            for assembly in assemblies
            for server in (first, second)
        ]
        for thread in reporters:
            thread.start()
        for thread in reporters:
            thread.join(timeout=30)
        assert statuses == [204] * 16
        tokenizer = a.get(f"/sessions/{session_id}").json()["tokenizer"]
        assert (tokenizer["samples"], tokenizer["calibrated"]) == (8, True)
        assert abs(tokenizer["ratio"] - 1.5) < 0.01
