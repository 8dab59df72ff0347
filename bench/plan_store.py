"""What the plan store takes beside the log it is derived from, on the public runs.

Every trajectory is replayed as one session (a 200k window, so no compaction): before each run
of model output (one model call) the items since the previous call are appended and a
session-mode `/assemble` answers. Then, from PostgreSQL: the bytes of each stored plan
(request, response, fingerprints and prefix state as text, and the candidate bodies it names),
the plans' tables (`assemblies` with its partitions, `candidate_bodies`) and the `facts` table's
total size (TOAST and indexes included), and the answers' own size for scale; then every plan is
read back (`GET /assemblies/{id}`, which re-derives it and checks its `plan_hash`) and compared
with the answer sent.
Run: `.venv/bin/python -m bench.plan_store`.
"""

from __future__ import annotations

import json

import psycopg
from fastapi.testclient import TestClient

from app.domain.items import is_model_output
from app.main import create_app
from app.settings import Settings
from bench.common import bench_database, libpq, load_trajectories

WINDOW = 200_000


def main() -> None:
    assemblies = answered = 0
    sent: dict[str, bytes] = {}
    with bench_database("contextd_bench_plan_store") as url:
        with TestClient(create_app(Settings(database_url=url))) as client:
            for number, items in enumerate(load_trajectories().values()):
                session = f"run-{number}"
                client.post(
                    "/sessions", json={"session_id": session, "context_window": WINDOW}
                ).raise_for_status()
                pending: list[dict[str, object]] = []
                for item in items:
                    if is_model_output(item) and pending:
                        client.post(
                            f"/sessions/{session}/items", json={"items": pending}
                        ).raise_for_status()
                        pending = []
                        answer = client.post("/assemble", json={"session_id": session})
                        answer.raise_for_status()
                        assemblies += 1
                        answered += len(answer.content)
                        sent[answer.json()["assembly_id"]] = answer.content
                    pending.append(item)
            # Every plan read back from what was stored alone (the log, the packed entries): the
            # answer as sent, byte for byte, its items hashing to its plan_hash (else a 409).
            caches = client.app.state.caches  # type: ignore[attr-defined]
            with caches.shown_lock:
                caches.shown.clear()
            differing = sum(
                json.dumps(client.get(f"/assemblies/{assembly_id}").json()["response"])
                != json.dumps(json.loads(content))
                for assembly_id, content in sent.items()
            )
        with psycopg.connect(libpq(url)) as db:
            stored, plans_size, facts_size, log = db.execute(
                "SELECT (SELECT sum(octet_length(request) + octet_length(response::text)"
                " + octet_length(fingerprints::text)"
                " + coalesce(octet_length(prefix_state::text), 0)) FROM assemblies)"
                " + (SELECT coalesce(sum(octet_length(body)), 0) FROM candidate_bodies),"
                " (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('assemblies'))"
                " + pg_total_relation_size('candidate_bodies'),"
                " pg_total_relation_size('facts'),"
                " (SELECT sum(octet_length(item::text)) FROM facts)"
            ).fetchone() or (0, 0, 0, 0)
    print(f"{assemblies} session-mode assemblies over the public runs, {WINDOW:,}-token windows")
    print(f"answer bytes per assembly:          {answered / assemblies:12,.0f}")
    print(f"stored bytes per assembly:          {stored / assemblies:12,.0f}")
    print(f"plans (assemblies, candidate_bodies): {plans_size:10,} bytes")
    print(f"facts table:                        {facts_size:12,} bytes ({log:,} of items)")
    print(f"plans / log:                        {plans_size / facts_size:12.1f}x")
    print(f"plans read back differing from the answer sent: {differing} of {len(sent)}")


if __name__ == "__main__":
    main()
