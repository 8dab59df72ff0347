"""Long sessions: what one agent turn costs as the log grows, on PostgreSQL over HTTP.

A coding agent's session, built from the public trajectories: a user's task, then tool calls
and their outputs, each call under a call_id of its own. The session's window is 128k tokens,
so at 2,000 facts and beyond it is full. At each size (500, 2,000, 20,000 and 100,000 facts)
the bench plays turns, each one new call and its output appended, then a session-mode
`/assemble`, untimed until the window's cut moves on (so that every size is measured at the
same point of the cut's cycle: right after it, the history shown is about half the window),
then `--turns` timed ones, and prints the fastest call (`Server-Timing`, and as the client sees
it) and the server's CPU per turn (the append, the assembly and the work done after answering).
Each call is set against the call at 2,000 facts of the same run: the target is 1.3x.

It runs twice, on fresh databases: once with the advice ignored, so that the window's fitting
does all the work, and once with it followed, compacting with the recommended strategy whenever
a turn's answer (or, while the log grows between sizes, the compaction advice) says so. With
the advice followed, it also times a `summary` compaction at each size, which always follows an
earlier one there (target: at 100,000 facts within 2x of the one at 2,000). With the advice
ignored, at the largest size it times the first call (an assembly) of a server that has never
seen the session, against the warm calls before it (target: 10x): once started beside the
first server, which still serves (a replica: it reads the session's last checkpoint and the
facts after it), and once after the first stopped (a restart: the first wrote the checkpoints
of the sessions it held as it stopped). Last, in this process, the
bytes a server keeps per fact of such a session beyond its items.

`--against DIR` serves the code of another checkout too (say `git worktree add DIR HEAD~1`), on
a database its own migrations made, and prints its figures beside this code's.
Run: `make bench` (or `.venv/bin/python -m bench.long_session`).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.domain.advice_figures import digest_of, figures_of
from app.domain.elision import elided
from app.domain.facts import EMPTY_FOLD, ActiveHistory, FactRecord, fold_facts
from app.domain.grounding_index import occurrence_index
from app.domain.normalize import DEFAULT_MODALITIES, DEFAULT_TRUNCATION_POLICY
from app.domain.session_view import ViewSettings, active_columns, view_of
from app.tokens import token_counter
from bench.common import (
    ROOT,
    bench_database,
    load_trajectories,
    running_server,
    server_cpu_seconds,
    server_ms,
)

SIZES = (500, 2_000, 20_000, 100_000)
REFERENCE_SIZE = 2_000
WINDOW = 128_000
ALIGN_TURNS = 1_500
"""Turns played at most before measuring a size, waiting for the window's cut to move."""
GROWTH_BATCH = 250
"""Facts appended per request while the log grows between sizes."""
SESSION = "long"
TASK = {
    "type": "message",
    "role": "user",
    "content": "Find why the test suite fails on the release branch, fix it, and run the suite.",
}


def tool_turns() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every call of the public trajectories with the output that answers it, in order."""
    turns = []
    for items in load_trajectories().values():
        calls = {item["call_id"]: item for item in items if item.get("type") == "function_call"}
        for item in items:
            if item.get("type") == "function_call_output" and item.get("call_id") in calls:
                turns.append((calls[item["call_id"]], item))
    return turns


class Turns:
    """The n-th call and its output, for any n: the trajectories' calls in a cycle, each under
    a call_id and item ids of its own, so that the log holds no repeated call."""

    def __init__(self) -> None:
        self._pool = tool_turns()

    def items(self, n: int) -> list[dict[str, Any]]:
        call, output = self._pool[n % len(self._pool)]
        call_id = f"call_{n}"
        return [
            {**call, "call_id": call_id, "id": f"fc_{n}"},
            {**output, "call_id": call_id, "id": f"fco_{n}"},
        ]


@dataclass
class Size:
    facts: int
    server_ms: list[float] = field(default_factory=list)
    client_ms: list[float] = field(default_factory=list)
    cpu_ms_per_turn: float = 0.0
    shown_items: int = 0
    shown_tokens: int = 0
    compact_ms: float | None = None
    after_compact_ms: float | None = None
    """The first call after that compaction, as the client waits."""
    compactions: int = 0


@dataclass
class Run:
    code: str
    follow: bool
    sizes: list[Size] = field(default_factory=list)
    warm_ms: float | None = None
    replica_ms: float | None = None
    """The first call on a second server, started while the first still serves."""
    restart_ms: float | None = None
    """The first call on a server started after the first one stopped."""


class Agent:
    """One session driven as a runtime drives it."""

    def __init__(
        self, client: httpx.Client, base: str, *, follow: bool, align_turns: int = ALIGN_TURNS
    ) -> None:
        self.client, self.base, self.follow = client, base, follow
        self.align_turns = align_turns
        self.turns = Turns()
        self.next_turn = 0
        self.last_seq = 0
        self.compactions = 0

    def create(self) -> None:
        self.client.post(
            "/sessions", json={"session_id": SESSION, "context_window": WINDOW}
        ).raise_for_status()
        self.append([TASK])

    def append(self, items: list[dict[str, Any]]) -> None:
        response = self.client.post(f"/sessions/{SESSION}/items", json={"items": items})
        response.raise_for_status()
        self.last_seq = response.json()["last_seq"]

    def compact(self, strategy: str) -> float:
        started = time.perf_counter()
        response = self.client.post("/compact", json={"session_id": SESSION, "strategy": strategy})
        elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        self.compactions += response.status_code == 201
        return elapsed

    def follow_advice(self, advice: dict[str, Any]) -> None:
        if self.follow and advice["should_compact"] and advice["recommended_strategy"]:
            self.compact(advice["recommended_strategy"])

    def grow_to(self, facts: int) -> None:
        """Appends calls and outputs until the log holds about `facts` facts, following the
        advice after each batch when the agent follows it."""
        while self.last_seq + 2 <= facts:
            pairs = min(GROWTH_BATCH // 2, (facts - self.last_seq) // 2)
            items = [item for n in range(pairs) for item in self.turns.items(self.next_turn + n)]
            self.next_turn += pairs
            self.append(items)
            if self.follow:
                advice = self.client.get(f"/sessions/{SESSION}/compaction-advice")
                advice.raise_for_status()
                self.follow_advice(advice.json())

    last_answer: dict[str, Any] | None = None

    def align(self) -> None:
        """Plays turns, untimed, until the window's cut moves on (the history shown shrinks),
        at most `ALIGN_TURNS`: a full window's history is shown from a stable cut that moves
        by half the window at a time, so what a call shows, and so what it costs, depends on
        how far the history has grown past the cut; every size is measured right after a move.
        """
        self.turn()
        shown = self.shown_tokens()
        for _ in range(self.align_turns):
            self.turn()
            previous, shown = shown, self.shown_tokens()
            if shown < previous - WINDOW // 8:
                return

    def shown_tokens(self) -> int:
        assert self.last_answer is not None
        return int(self.last_answer["total_tokens"])

    def turn(self) -> tuple[float, float]:
        """One turn: a new call and its output, then the assembly. Its server and client ms.

        The health check between them, on the same connection, waits for the work the append
        left for after its answer (grading the previous assembly), which the CPU per turn
        counts, so that the assembly is timed alone."""
        self.append(self.turns.items(self.next_turn))
        self.client.get("/healthz").raise_for_status()
        self.next_turn += 1
        started = time.perf_counter()
        response = self.client.post("/assemble", json={"session_id": SESSION})
        elapsed = (time.perf_counter() - started) * 1000
        server = server_ms(response)
        self.last_answer = response.json()
        self.follow_advice(self.last_answer["advice"])
        return server, elapsed


def first_call(url: str, source: Path) -> float:
    """The first call, an assembly, on a server that has never seen the session, as the
    client waits."""
    with (
        running_server(url, source=source) as fresh,
        httpx.Client(base_url=fresh, timeout=600) as c,
    ):
        started = time.perf_counter()
        c.post("/assemble", json={"session_id": SESSION}).raise_for_status()
        elapsed = (time.perf_counter() - started) * 1000
        outcomes = [
            line.removeprefix("contextd_checkpoints_total")
            for line in c.get("/metrics").text.splitlines()
            if line.startswith("contextd_checkpoints_total")
        ]
        print(f"  first call: {elapsed:.1f} ms; checkpoints {', '.join(outcomes) or 'none'}")
        return elapsed


def play(
    code: str,
    source: Path,
    *,
    follow: bool,
    sizes: tuple[int, ...],
    turns: int,
    align_turns: int = ALIGN_TURNS,
) -> Run:
    run = Run(code, follow)
    name = f"contextd_bench_long_{code}_{int(follow)}"
    with bench_database(name, source=source) as url:
        with running_server(url, source=source) as base:
            client = httpx.Client(base_url=base, timeout=600)
            agent = Agent(client, base, follow=follow, align_turns=align_turns)
            agent.create()
            for facts in sizes:
                agent.grow_to(facts)
                if follow or not align_turns:
                    # The first calls after the growth, untimed: the second's append grades
                    # the first's assembly, which indexes every fact the growth appended (once
                    # per session: the growth itself made no assembly to grade).
                    agent.turn()
                    agent.turn()
                else:
                    agent.align()
                size = Size(facts=agent.last_seq)
                spent = server_cpu_seconds(base)
                for _ in range(turns):
                    server, elapsed = agent.turn()
                    size.server_ms.append(server)
                    size.client_ms.append(elapsed)
                client.get("/healthz").raise_for_status()  # waits for the work after the answer
                size.cpu_ms_per_turn = (server_cpu_seconds(base) - spent) * 1000 / turns
                assert agent.last_answer is not None
                size.shown_items = len(agent.last_answer["items"])
                size.shown_tokens = agent.last_answer["total_tokens"]
                if follow:
                    size.compact_ms = agent.compact("summary")
                    _, size.after_compact_ms = agent.turn()
                size.compactions = agent.compactions
                run.sizes.append(size)
                print(
                    f"  {code} {'followed' if follow else 'ignored'} {describe(size)}", flush=True
                )
            if not follow:
                run.warm_ms = min(run.sizes[-1].client_ms)
                # Another server on the same database, the first still serving: it reads the
                # session afresh, from its last checkpoint (or, code without one, the log).
                run.replica_ms = first_call(url, source)
            client.close()
        if not follow:
            # The first server stopped (as a deploy stops it); a new one reads the session.
            run.restart_ms = first_call(url, source)
    return run


def describe(size: Size) -> str:
    compact = (
        f" compact {size.compact_ms:8.1f} ms, the call after it {size.after_compact_ms:8.1f} ms"
        if size.compact_ms is not None
        else ""
    )
    return (
        f"{size.facts:>7,} facts ({size.shown_items:,} items, {size.shown_tokens:,} tokens"
        f" shown): server {min(size.server_ms):8.1f} ms, client "
        f"{min(size.client_ms):8.1f} ms, cpu/turn {size.cpu_ms_per_turn:8.1f} ms{compact}"
    )


def report(runs: list[Run]) -> None:
    print()
    header = (
        f"{'code':<8} {'advice':<9} {'facts':>8} {'server ms':>10} {'client ms':>10} "
        f"{'vs 2k':>6} {'cpu/turn':>9} {'compact ms':>11} {'vs 2k':>6} {'compactions':>11}"
    )
    print(header)
    for run in runs:
        reference = min(run.sizes, key=lambda s: abs(s.facts - REFERENCE_SIZE))
        for size in run.sizes:
            ratio = min(size.client_ms) / min(reference.client_ms)
            compact, compact_ratio = "", ""
            if size.compact_ms is not None and reference.compact_ms is not None:
                compact = f"{size.compact_ms:.1f}"
                compact_ratio = f"{size.compact_ms / reference.compact_ms:.2f}"
            print(
                f"{run.code:<8} {'followed' if run.follow else 'ignored':<9} {size.facts:>8,} "
                f"{min(size.server_ms):>10.1f} {min(size.client_ms):>10.1f} {ratio:>6.2f} "
                f"{size.cpu_ms_per_turn:>9.1f} {compact:>11} {compact_ratio:>6} "
                f"{size.compactions:>11}"
            )
        if run.warm_ms is not None and run.replica_ms is not None and run.restart_ms:
            print(
                f"{run.code:<8} the first call at {run.sizes[-1].facts:,} facts of a server new "
                f"to the session, the first still serving: {run.replica_ms:.1f} ms, "
                f"{run.replica_ms / run.warm_ms:.1f}x a warm call ({run.warm_ms:.1f} ms); "
                f"after the first stopped: {run.restart_ms:.1f} ms, "
                f"{run.restart_ms / run.warm_ms:.1f}x"
            )
    print(
        "server / client ms: the fastest call of the turns (Server-Timing / as the client waits);"
    )
    print("vs 2k: that call over the call at 2,000 facts of the same run (target: 1.3x)")
    print("cpu/turn: the server's CPU per turn: the append, the assembly, the work after it")
    print("compact: a summary compaction after the turns, when the advice is followed (target:")
    print("  2x the one at 2,000 facts); compactions: how many the session has had by then")
    print(f"median client ms per size: {median_line(runs)}")
    print(f"slowest client ms per size: {slowest_line(runs)}")


def median_line(runs: list[Run]) -> str:
    return "; ".join(
        f"{run.code} {'followed' if run.follow else 'ignored'} "
        + ", ".join(f"{s.facts:,}: {statistics.median(s.client_ms):.1f}" for s in run.sizes)
        for run in runs
    )


def slowest_line(runs: list[Run]) -> str:
    return "; ".join(
        f"{run.code} {'followed' if run.follow else 'ignored'} "
        + ", ".join(f"{s.facts:,}: {max(s.client_ms):.1f}" for s in run.sizes)
        for run in runs
    )


def held_per_fact(facts: int) -> dict[str, float]:
    """Bytes per fact, traced in this process, of what a server keeps with a session of
    `facts` facts beyond its items: the fold's columns, the session view, the advice's figures,
    the elision runs and the grader's occurrence index (what `DERIVED_BYTES_PER_FACT` weighs
    each fold by in the cache)."""
    turns, log = Turns(), [FactRecord(1, "message", TASK, {}, None, 20)]
    while len(log) < facts:
        for item in turns.items(len(log) // 2):
            log.append(FactRecord(len(log) + 1, item["type"], item, {}, None, 50))
    count = token_counter("o200k_base")
    count("the encoding loaded before tracing")
    gc.collect()
    tracemalloc.start()
    marks = [tracemalloc.get_traced_memory()[0]]
    fold = EMPTY_FOLD
    for start in range(0, len(log), GROWTH_BATCH):
        batch = log[start : start + GROWTH_BATCH]
        fold = fold_facts(fold, batch, last_seq=batch[-1].seq)
    active = ActiveHistory.of(
        fold, session_pk=1, encoding="o200k_base", context_window=WINDOW, unit=None
    )
    marks.append(tracemalloc.get_traced_memory()[0])
    view = view_of(
        None,
        active_columns(active),
        settings=ViewSettings(
            count=count,
            input_modalities=DEFAULT_MODALITIES,
            truncation=DEFAULT_TRUNCATION_POLICY,
            stored_counts=True,
        ),
    )
    marks.append(tracemalloc.get_traced_memory()[0])
    digest = digest_of(None, view)  # held, as a server holds it, while it is measured
    figures_of(digest, view)
    marks.append(tracemalloc.get_traced_memory()[0])
    _, runs = elided(None, active, view, shown={}, default_drop="window", record_tokens=0)
    marks.append(tracemalloc.get_traced_memory()[0])
    occurrence_index(active.logged)
    marks.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    del digest, runs
    parts = ("fold", "view", "advice figures", "elision runs", "grounding index")
    held = {
        part: (after - before) / len(log)
        for part, before, after in zip(parts, marks, marks[1:], strict=False)
    }
    return {
        **held,
        "all": (marks[-1] - marks[0]) / len(log),
        "items' JSON": fold.held_bytes / len(log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, help="a checkout whose code is measured too")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument(
        "--advice", choices=("ignored", "followed", "both"), default="both", help="which runs"
    )
    parser.add_argument(
        "--align-turns",
        type=int,
        default=ALIGN_TURNS,
        help="untimed turns at most, waiting for the cut to move (0: measure at once, as code "
        "whose calls cost seconds at 20,000 facts must be)",
    )
    arguments = parser.parse_args()
    codes = [("this", ROOT)]
    if arguments.against is not None:
        codes.append(("against", arguments.against.resolve()))
    follows = {"ignored": (False,), "followed": (True,), "both": (False, True)}[arguments.advice]
    runs = [
        play(
            code,
            source,
            follow=follow,
            sizes=tuple(arguments.sizes),
            turns=arguments.turns,
            align_turns=arguments.align_turns,
        )
        for follow in follows
        for code, source in codes
    ]
    report(runs)
    held = held_per_fact(max(arguments.sizes))
    print(
        f"bytes held per fact at {max(arguments.sizes):,} facts, beyond the items: "
        + ", ".join(f"{part} {value:,.0f}" for part, value in held.items())
    )


if __name__ == "__main__":
    main()
