"""A database that stalls: how soon every request is answered, and liveness meanwhile.

A TCP proxy in front of PostgreSQL holds every connection open and forwards nothing (the
connections the pool holds and those opened during the stall), as behind a hung host. Many
clients, more than the server's worker threads, send reads, appends and session-mode
assemblies throughout; /healthz and /readyz are probed on connections of their own. Prints,
per kind of request, the answers by status and the p50 and slowest answer time, in seconds and
in multiples of `CTX_DB_TIMEOUT_SECONDS`; /healthz's slowest answer; /readyz's answers; and
how long after the database answers again the service does too. The run fails on any request
that was not answered in full.
Run: `.venv/bin/python -m bench.stall [--db-timeout 1] [--clients 60] [--seconds 6]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass

import httpx
from sqlalchemy.engine import make_url

from bench.common import bench_database
from bench.servers import TcpProxy, running, with_port


@dataclass(frozen=True)
class Answer:
    what: str
    seconds: float
    status: int | str


def _ask(client: httpx.Client, what: str, method: str, path: str, body: object = None) -> Answer:
    started = time.monotonic()
    try:
        status: int | str = client.request(method, path, json=body).status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return Answer(what, time.monotonic() - started, status)


def _client_load(
    base: str, session_id: str, *, timeout: float, until: threading.Event, answers: list[Answer]
) -> None:
    with httpx.Client(base_url=base, timeout=timeout) as client:
        n = 0
        while not until.is_set():
            n += 1
            match n % 3:
                case 0:
                    answers.append(_ask(client, "get", "GET", f"/sessions/{session_id}"))
                case 1:
                    items = {"items": [{"type": "message", "role": "user", "content": f"{n}"}]}
                    path = f"/sessions/{session_id}/items"
                    answers.append(_ask(client, "append", "POST", path, items))
                case _:
                    body = {"session_id": session_id}
                    answers.append(_ask(client, "assemble", "POST", "/assemble", body))


def _probes(
    base: str, path: str, *, every: float, until: threading.Event, answers: list[Answer]
) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        while not until.is_set():
            answers.append(_ask(client, path, "GET", path))
            time.sleep(every)


def _row(what: str, answers: list[Answer], db_timeout: float) -> str:
    times = [a.seconds for a in answers]
    statuses = ", ".join(
        f"{s}: {n}" for s, n in sorted(Counter(a.status for a in answers).items(), key=str)
    )
    p50, slowest = statistics.median(times), max(times)
    return (
        f"{what:<9} {len(answers):>5}  {statuses:<22}  p50 {p50:6.3f} s ({p50 / db_timeout:4.1f}x)"
        f"  max {slowest:6.3f} s ({slowest / db_timeout:4.1f}x)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db-timeout", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    sessions = [f"stall-{tag}-{n}" for n in range(args.clients)]
    # A client gives up at many times any wait the service may have: only a hang hits it.
    client_timeout = 30 * args.db_timeout
    with bench_database("contextd_bench_stall") as url:
        database = make_url(url)
        proxy = TcpProxy((database.host or "127.0.0.1", database.port or 5432))
        proxy.start()
        try:
            with running(
                with_port(url, proxy.port), CTX_DB_TIMEOUT_SECONDS=str(args.db_timeout)
            ) as server:
                with httpx.Client(base_url=server.base, timeout=client_timeout) as client:
                    for session_id in sessions:
                        client.post("/sessions", json={"session_id": session_id}).raise_for_status()
                load: list[Answer] = []
                probes: dict[str, list[Answer]] = {"/healthz": [], "/readyz": []}
                stop = threading.Event()
                threads = [
                    threading.Thread(
                        target=_client_load,
                        args=(server.base, session_id),
                        kwargs={"timeout": client_timeout, "until": stop, "answers": load},
                    )
                    for session_id in sessions
                ]
                threads += [
                    threading.Thread(
                        target=_probes,
                        args=(server.base, path),
                        kwargs={"every": every, "until": stop, "answers": probes[path]},
                    )
                    for path, every in (("/healthz", 0.05), ("/readyz", 0.5))
                ]
                proxy.stall()
                for thread in threads:
                    thread.start()
                time.sleep(args.seconds)
                stop.set()
                for thread in threads:
                    thread.join()
                proxy.resume()
                resumed_at = time.monotonic()
                with httpx.Client(base_url=server.base, timeout=client_timeout) as client:
                    while client.get(f"/sessions/{sessions[0]}").status_code != 200:
                        time.sleep(0.05)
                    recovered = time.monotonic() - resumed_at
        finally:
            proxy.resume()
            proxy.stop()
    by_kind: dict[str, list[Answer]] = defaultdict(list)
    for answer in load:
        by_kind[answer.what].append(answer)
    print(
        f"database stalled {args.seconds:.0f} s, CTX_DB_TIMEOUT_SECONDS={args.db_timeout:g}, "
        f"{args.clients} clients"
    )
    for what, answers in sorted(by_kind.items()):
        print(_row(what, answers, args.db_timeout))
    for path, answers in probes.items():
        print(_row(path, answers, args.db_timeout))
    print(f"answering again {recovered:.2f} s after the database does")
    unanswered = [a for a in load if not isinstance(a.status, int)]
    if unanswered:
        print(f"FAIL: {len(unanswered)} not answered: {Counter(a.status for a in unanswered)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
