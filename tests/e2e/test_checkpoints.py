"""Real server processes on one session: two writing checkpoint links in turns (so their
chains branch, and each one's whole links remove the other's older links), one keeping no fold
(so every call it serves restores the newest whole chain and folds the facts after it), and one
reading the whole log with checkpoints off. Taking turns at appending, compacting, retracting
and assembling, they answer every state alike, and a process started afresh at the end
restores the checkpoint and answers alike too."""

from __future__ import annotations

import uuid

import httpx
import orjson

from tests.answers import decisions
from tests.conftest import TRAJECTORIES, load_trajectory
from tests.e2e.servers import running

EVERY = "40"
"""Facts between two checkpoint links, and before the first."""


def _checkpoint_outcomes(client: httpx.Client) -> dict[str, float]:
    outcomes = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("contextd_checkpoints_total{"):
            label, value = line.split("} ")
            outcomes[label.split('"')[1]] = float(value)
    return outcomes


def test_processes_restoring_checkpoints_answer_as_one_reading_the_log(postgres_url: str) -> None:
    session_id = f"checkpoints-{uuid.uuid4().hex[:8]}"
    items = [item for path in TRAJECTORIES[2:5] for item in load_trajectory(path)]
    body = {"session_id": session_id}
    with (
        running(
            postgres_url, CTX_CHECKPOINT_EVERY_FACTS=EVERY, CTX_CHECKPOINT_FROM_FACTS=EVERY
        ) as writer,
        running(
            postgres_url, CTX_CHECKPOINT_EVERY_FACTS=EVERY, CTX_CHECKPOINT_FROM_FACTS=EVERY
        ) as second_writer,
        running(
            postgres_url,
            CTX_FOLD_CACHE_BYTES="0",
            CTX_CHECKPOINT_EVERY_FACTS=EVERY,
            CTX_CHECKPOINT_FROM_FACTS=EVERY,
        ) as restorer,
        running(postgres_url, CTX_CHECKPOINT_EVERY_FACTS="0") as reference,
        httpx.Client(base_url=writer.base, timeout=60) as w,
        httpx.Client(base_url=second_writer.base, timeout=60) as w2,
        httpx.Client(base_url=restorer.base, timeout=60) as r,
        httpx.Client(base_url=reference.base, timeout=60) as log_reader,
    ):
        created = w.post("/sessions", json={"session_id": session_id, "context_window": 12_000})
        assert created.status_code == 201, created.text
        compared = 0
        for step, start in enumerate(range(0, len(items), 37)):
            by = (w, r)[step % 2]
            appended = by.post(
                f"/sessions/{session_id}/items", json={"items": items[start : start + 37]}
            )
            assert appended.status_code == 201, appended.text
            if step == 5:
                compacted = r.post("/compact", json={**body, "strategy": "clear_tool_results"})
                assert compacted.status_code in (200, 201), compacted.text
            if step == 9:
                retracted = w.post(f"/sessions/{session_id}/retractions", json={})
                assert retracted.status_code == 201, retracted.text
            # The writers take turns at assembling: each writes a link every 40 facts, a delta
            # against the link it wrote or restored last, so their chains branch, and each
            # whole link removes the other's older links.
            by = (w, w2)[step // 2 % 2]
            by.post("/assemble", json=body).raise_for_status()
            by.get("/healthz")  # the work after the answer (the checkpoint's write) is done
            if step % 2 == 1:
                clients = (w, w2, r, log_reader)
                answers = [client.post("/assemble", json=body) for client in clients]
                assert [answer.status_code for answer in answers] == [201] * 4
                assert len({decisions(answer.json()) for answer in answers}) == 1
                compared += 1
        last = decisions(log_reader.post("/assemble", json=body).json())
        written, second = _checkpoint_outcomes(w), _checkpoint_outcomes(w2)
        assert written.get("written_whole", 0) >= 1
        assert written.get("written_delta", 0) + second.get("written_delta", 0) >= 3
        assert second.get("written_delta", 0) + second.get("written_whole", 0) >= 1
        # No link was refused: one another worker's whole link removed while a restore read
        # its chain is read again, not taken for corrupt.
        outcomes = [*written, *second, *_checkpoint_outcomes(r)]
        assert [outcome for outcome in outcomes if outcome.startswith("refused")] == []
        # The restorer keeps no fold: each of its calls restored the latest checkpoint's chain.
        assert _checkpoint_outcomes(r).get("restored", 0) >= compared + 2
        assert "restored" not in _checkpoint_outcomes(log_reader)
    assert compared >= 5
    assert orjson.loads(last)["elided"], "the window was meant to leave history out"
    # A process that has never seen the session starts from the checkpoint: the same answer.
    with (
        running(
            postgres_url, CTX_CHECKPOINT_EVERY_FACTS=EVERY, CTX_CHECKPOINT_FROM_FACTS=EVERY
        ) as fresh,
        httpx.Client(base_url=fresh.base) as f,
    ):
        assert decisions(f.post("/assemble", json=body).json()) == last
        assert _checkpoint_outcomes(f) == {"restored": 1.0}
