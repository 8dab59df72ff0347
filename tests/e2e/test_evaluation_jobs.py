"""An evaluation job across real server processes: another worker follows it, and a job whose
process is killed is answered as lost, never as still running."""

from __future__ import annotations

import time
import uuid

import httpx

from tests.conftest import TRAJECTORIES, load_trajectory
from tests.e2e.servers import Server

JOBS = {
    "CTX_EVALUATE_SYNC_CALLS": "0",
    "CTX_EVALUATE_PROGRESS_SECONDS": "0.05",
    "CTX_EVALUATE_LOST_AFTER_SECONDS": "2",
}
SLOW = {"variants": [{"name": f"v{n}", "keep_recent": n} for n in range(8)]}


def test_a_job_is_followed_from_another_process_and_lost_with_its_own(postgres_url: str) -> None:
    session_id = f"evaluation-jobs-{uuid.uuid4().hex[:8]}"
    items = load_trajectory(TRAJECTORIES[4])
    runner, other = Server(postgres_url, env=JOBS), Server(postgres_url, env=JOBS)
    runner.start()
    other.start()
    try:
        with httpx.Client(timeout=30) as http:
            http.post(f"{runner.base}/sessions", json={"session_id": session_id}).raise_for_status()
            http.post(
                f"{runner.base}/sessions/{session_id}/items", json={"items": items}
            ).raise_for_status()
            started = http.post(f"{runner.base}/sessions/{session_id}/evaluate", json=SLOW)
            location = started.headers["location"]
            # The other process answers for the job while the first runs it.
            while (seen := http.get(f"{other.base}{location}").json())["progress"][
                "calls_done"
            ] == 0:
                time.sleep(0.05)
            runner.kill()
            while (state := http.get(f"{other.base}{location}").json())["status"] == "running":
                time.sleep(0.1)
    finally:
        runner.stop()
        other.stop()

    assert started.status_code == 202
    assert seen["status"] == "running"
    assert state["status"] == "failed"
    assert state["error"].startswith("lost: the process running it stopped")
    assert seen["progress"]["calls_done"] <= state["progress"]["calls_done"]
    assert state["progress"]["calls_done"] < state["progress"]["calls_total"]
    assert state["result"] is None
