"""The agent loop, replayed: what a whole session costs and what the model still sees, as
`POST /sessions/{id}/evaluate` measures it.

For every run in `tests/data/trajectories` (or the directories given), a session whose usable
window is `WINDOW_SHARE` of the run's tokens (at least `MIN_WINDOW`); its `context_window` is the
model window whose usable part (less the server's output reserve) that is; its cache terms are
the simulated provider's (`bench.provider_cache.PROVIDER`). The goal is the run's first user
message. The run's log is appended as a runtime appends it: before every model call (the first
item of each run of model output), the items since the previous one, on the replay's clock
(calls `STEP_SECONDS` apart). Then the service's own evaluation replays it as a runtime would
(`app.usecases.evaluate`): session-mode `/assemble` before every call, `/compact` with the
recommended strategy whenever the advice says so and `/assemble` again, that context served by
the simulated provider cache and its usage reported. One replay engine serves the product, this
bench and the docs: every figure of the contextd rows is the evaluation's answer, summed over
the runs (`app.domain.evaluation.combined`).

Configurations, each a variant of the evaluation: a runtime that follows the advice (the
session's own settings); the same with the service told no cache discount (advice weighed by
tokens alone, as before it priced the cache; the provider is still the simulated one); one that
never compacts (what session-mode assembly's stable cuts make of an overflowing history); the
realistic profile, every run concatenated into one session under a 128k window, following the
advice; and the first two again on a log with a pause of `PAUSE_SECONDS` every `PAUSE_EVERY`
calls (the trajectories carry no timestamps, so the bench injects idle gaps).

Per call (`app.domain.evaluation`): input, reused (the leading messages byte-identical to the
previous call's) beside the service's own predicted reuse, fresh = input - reused, cost = fresh
+ `CACHED_PRICE` x reused; the goal present, pairing valid, over budget, the goal's restatement,
whether assembly had to cut the history; the prefix breaks; the simulated provider's cache and
the service's classes of what it served less than predicted; and next-action grounding: the
identifiers the call's own output went on to use that the history before it holds (less the
goal's), visible in the messages or held by an `elided` entry (recallable; `/recall` over the
entry's range is asked for each), the calls that hide anything and name every entry's first
seq, and the service's own grade of each call made when its output was appended.

In the same run, two baselines over the same calls, computed here: the whole normalized history
(no management) and LangChain's `trim_messages` (strategy `last`, `include_system`,
`start_on="human"`) to the usable window.
Run: `make bench` (or `.venv/bin/python -m bench.replay [DIR ...]`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from app.domain.evaluation import VariantTally, combined
from app.domain.grounding import ground, items_text, needed_identifiers
from app.domain.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    Item,
    is_model_output,
    item_type,
    visible_text,
)
from app.domain.normalize import normalize_history
from app.main import create_app
from app.settings import Settings
from app.tokens import token_counter
from bench.common import TRAJECTORIES, bench_database
from bench.provider_cache import (
    BLIND,
    CACHE_HEADER,
    CACHE_LEGEND,
    PAUSE_EVERY,
    PAUSE_SECONDS,
    PROVIDER,
    SimulatedClock,
    Timing,
    session_terms,
)

WINDOW_SHARE = 0.3
MIN_WINDOW = 4_000
DEFAULT_RESERVE = 16_000
CACHED_PRICE = 0.1
PROFILE_WINDOW = 128_000

count_tokens = token_counter("o200k_base")

Figures = dict[str, Any]
"""One variant's figures, as the evaluation answers them."""


def call_points(items: Sequence[Item]) -> list[int]:
    """Positions where a model call starts: the first item of each run of model output."""
    return [
        n
        for n, item in enumerate(items)
        if is_model_output(item) and (n == 0 or not is_model_output(items[n - 1]))
    ]


def tokens_of(messages: Sequence[Item]) -> list[int]:
    return [count_tokens(visible_text(message)) for message in messages]


HEADER = (
    f"{'':<52} {'calls':>5} {'reused':>7} {'service':>7} {'fresh':>10} {'cost':>11} "
    f"{'cmp/100':>8} {'goal':>6} {'paired':>6} {'over':>5} {'restate':>8} {'cut':>5}"
)
GROUNDING_HEADER = (
    f"{'grounding':<52} {'calls':>5} {'need':>5} {'needed':>7} {'visible':>8} {'+recall':>8} "
    f"{'all vis':>8} {'hiding':>6} {'seqs':>6} {'recall':>9} {'online':>8} {'all vis':>8}"
)
GROUNDING_LEGEND = (
    "need: calls that need any identifier; needed: identifiers needed; visible, +recall: shares"
    " of them visible, visible or recallable; all vis: share of the calls that need any with"
    " all visible;\nhiding: calls with `elided` entries; seqs: those naming every entry's first"
    " seq; recall: recallable identifiers the recall search hands back, of those checked;\n"
    "online, all vis: the same two figures as the service graded each call itself when its"
    " output was appended (an assembly's `grounding`)"
)


def to_langchain(items: Sequence[Item]) -> list[BaseMessage]:
    """The history as LangChain messages, each carrying its index as `id`."""
    messages: list[BaseMessage] = []
    for n, item in enumerate(items):
        kind, text, ident = item_type(item), visible_text(item), str(n)
        if kind == "message" and item.get("role") == "user":
            messages.append(HumanMessage(content=text, id=ident))
        elif kind == "message" and item.get("role") in ("system", "developer"):
            messages.append(SystemMessage(content=text, id=ident))
        elif kind in CALL_TYPES:
            raw = item.get("arguments", item.get("input", ""))
            try:
                args = json.loads(raw) if isinstance(raw, str) else {}
            except ValueError:
                args = {"input": raw}
            call = {
                "name": str(item.get("name", "shell")),
                "id": str(item.get("call_id")),
                "args": args if isinstance(args, dict) else {"input": args},
            }
            messages.append(AIMessage(content="", tool_calls=[call], id=ident))
        elif kind in OUTPUT_TYPES:
            messages.append(
                ToolMessage(content=text, tool_call_id=str(item.get("call_id")), id=ident)
            )
        else:  # assistant messages and reasoning
            messages.append(AIMessage(content=text, id=ident))
    return messages


def langchain_trim(items: Sequence[Item], *, window: int) -> list[Item]:
    """`trim_messages(strategy="last")` to `window`, mapped back to the Responses items kept."""
    sizes = tokens_of(items)

    def counter(messages: list[BaseMessage]) -> int:
        return sum(sizes[int(m.id or 0)] for m in messages)

    kept = trim_messages(
        to_langchain(items),
        max_tokens=window,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )
    return [items[int(m.id or 0)] for m in kept]


@dataclass(frozen=True)
class Run:
    """One session to replay: a run's items under a window."""

    name: str
    items: list[Item]
    window: int
    """The usable window."""
    context_window: int


def share_window(items: Sequence[Item]) -> tuple[int, int]:
    """(usable window, context_window) of a run's session: `WINDOW_SHARE` of its tokens (at
    least `MIN_WINDOW`), and the model window whose usable part that is under the server's
    default reserve (which never takes more than half the window)."""
    history = normalize_history(items, count_tokens=count_tokens).items
    window = max(MIN_WINDOW, int(WINDOW_SHARE * sum(tokens_of(history))))
    return window, window + min(DEFAULT_RESERVE, window)


def concatenated(runs: dict[str, list[Item]]) -> list[Item]:
    """Every run, one after the other, as one long session; call ids are made unique per run."""
    items: list[Item] = []
    for number, run in enumerate(runs.values()):
        for item in run:
            if "call_id" in item:
                item = {**item, "call_id": f"r{number}-{item['call_id']}"}
            items.append(item)
    return items


def goal_of(items: Sequence[Item]) -> str:
    """The run's goal: its first user message."""
    history = normalize_history(items, count_tokens=count_tokens).items
    return next(visible_text(i) for i in history if i.get("role") == "user")


def log_run(client: TestClient, session_id: str, run: Run, *, timing: Timing) -> None:
    """The run's log, appended as a runtime appends it: the session and its goal, then before
    each model call the items since the previous one, on the replay's clock."""
    client.post(
        "/sessions",
        json={
            "session_id": session_id,
            "context_window": run.context_window,
            "cache": session_terms(PROVIDER),
        },
    ).raise_for_status()
    client.put(f"/sessions/{session_id}/goal", json={"text": goal_of(run.items)}).raise_for_status()
    appended = 0
    for number, point in enumerate(call_points(run.items)):
        timing.before_call(number)
        if point > appended:
            batch = {"items": run.items[appended:point], "idempotency_key": f"{session_id}-{point}"}
            client.post(f"/sessions/{session_id}/items", json=batch).raise_for_status()
            appended = point
    if run.items[appended:]:
        rest = {"items": run.items[appended:], "idempotency_key": f"{session_id}-end"}
        client.post(f"/sessions/{session_id}/items", json=rest).raise_for_status()


VARIANTS = {
    "blind": {"name": "blind", "cache": BLIND},
    "never": {"name": "never", "follow_advice": False},
}
"""The variants the configurations evaluate beside the session's own settings (`current`)."""


def evaluated(
    client: TestClient, run: Run, *, timing: Timing, variants: Sequence[str]
) -> dict[str, Figures]:
    """The run logged on a session of its own, and the evaluation's figures of it, by
    variant."""
    session_id = f"replay-1-{run.context_window}-{run.name}"[:200]
    log_run(client, session_id, run, timing=timing)
    answer = client.post(
        f"/sessions/{session_id}/evaluate",
        json={"variants": [VARIANTS[name] for name in variants]},
    )
    answer.raise_for_status()
    return {variant["name"]: variant for variant in answer.json()["variants"]}


def baselines(run: Run) -> tuple[Figures, Figures]:
    """The figures of the whole normalized history and of `trim_messages` to the window, at
    every call of the run."""
    goal = goal_of(run.items)
    whole = VariantTally(window=run.window, terms=PROVIDER)
    trimmed = VariantTally(window=run.window, terms=PROVIDER)
    before, appended = "", 0  # the text of the items before the call
    items = run.items
    for point in call_points(items):
        if point > appended:
            # System messages travel as instructions, beside whatever history a manager keeps.
            sent = [i for i in items[appended:point] if i.get("role") != "system"]
            before += "\n" + items_text(sent)
            appended = point
        end = next((n for n in range(point, len(items)) if not is_model_output(items[n])), None)
        needed = needed_identifiers(items_text(items[point:end]), history=before, goal=goal)
        so_far = normalize_history(items[:point], count_tokens=count_tokens).items
        for tally, messages in (
            (whole, so_far),
            (trimmed, langchain_trim(so_far, window=run.window)),
        ):
            tally.call(
                messages,
                tokens_of(messages),
                at=0.0,
                goal=goal,
                grounding=ground(needed, shown=items_text(messages), elided=()),
            )
    return whole.figures(), trimmed.figures()


def row(label: str, f: Figures) -> str:
    calls = max(f["calls"], 1)
    reused, service = f["reused_tokens"], f["predicted_reused_tokens"]
    cost = f["fresh_tokens"] + CACHED_PRICE * reused
    predicted = f"{service / max(f['input_tokens'], 1):7.1%}" if service else "      —"
    return (
        f"{label:<52} {f['calls']:>5} {reused / max(f['input_tokens'], 1):>7.1%} {predicted} "
        f"{f['fresh_tokens']:>10,} {cost:>11,.0f} {100 * f['compactions'] / calls:>8.1f} "
        f"{f['goal_kept_calls'] / calls:>6.0%} {f['pairing_kept_calls'] / calls:>6.0%} "
        f"{f['over_budget_calls']:>5} {f['restated_tokens'] / calls:>8.0f} "
        f"{f['history_cut_calls']:>5}"
    )


def grounding_row(label: str, f: Figures, *, acceptance: bool) -> str:
    g = f["grounding"]
    needed = max(g["needed"], 1)
    line = (
        f"{label:<52} {f['calls']:>5} {g['calls_needing']:>5} {g['needed']:>7,} "
        f"{g['visible'] / needed:>8.1%} {(g['visible'] + g['recallable']) / needed:>8.1%} "
        f"{g['calls_seeing_all'] / max(g['calls_needing'], 1):>8.1%}"
    )
    if not acceptance:
        return line
    graded = g["graded"]
    recall = f"{g['recall_confirmed']}/{g['recall_checked']}"
    return (
        f"{line} {g['calls_hiding']:>6} {g['calls_naming_every_seq']:>6} {recall:>9}"
        f" {graded['visible'] / max(graded['needed'], 1):>8.1%}"
        f" {graded['calls_seeing_all'] / max(graded['calls_needing'], 1):>8.1%}"
    )


def cache_row(label: str, f: Figures) -> str:
    """The simulated provider's figures; the cost in its terms, from the summed counts."""
    cache = f["provider_cache"]
    cost = (
        f["input_tokens"]
        - f["cached_tokens"]
        + PROVIDER.read_price * f["cached_tokens"]
        + (PROVIDER.write_price - 1) * f["written_tokens"]
    )
    predicted, served = cache["predicted_unexpired_tokens"], cache["cached_unexpired_tokens"]
    agreement = predicted / served - 1 if served else float(predicted > 0)
    misses = cache["misses"]
    classes = ", ".join(f"{k} {v}" for k, v in cache["misses_by_class"].items()) or "none"
    return (
        f"{label:<52} {f['calls']:>5} {f['cached_tokens'] / max(f['input_tokens'], 1):>7.1%} "
        f"{f['written_tokens']:>10,} {cost:>11,.0f} {cache['expired_calls']:>7} "
        f"{agreement:>+8.2%} {misses - cache['unclassified_misses']:>4}/{misses:<4} {classes}"
    )


def load_runs(directories: Sequence[Path]) -> dict[str, list[Item]]:
    paths = (
        sorted(p for d in directories for p in d.glob("*.jsonl")) if directories else TRAJECTORIES
    )
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in paths
    }


@dataclass(frozen=True)
class Configuration:
    label: str
    runs: Sequence[Run]
    variant: str
    """The evaluation's variant: `current` (the session's own settings), or one of `VARIANTS`."""
    pauses: bool = False
    verbose: bool = False


def configurations(runs: Sequence[Run], profile: Run) -> list[Configuration]:
    share = f"usable window {WINDOW_SHARE:.0%} of each run's tokens (at least {MIN_WINDOW:,})"
    paused = f"a {PAUSE_SECONDS / 60:.0f}-minute pause every {PAUSE_EVERY} calls"
    n = len(runs)
    return [
        Configuration(f"{n} runs, {share}, following the advice", runs, "current", verbose=True),
        Configuration(f"{n} runs, {share}, following advice blind to the cache", runs, "blind"),
        Configuration(f"{n} runs, {share}, never compacting", runs, "never"),
        Configuration(
            f"the {n} runs as one session, a {PROFILE_WINDOW:,} window", [profile], "current"
        ),
        Configuration(f"{n} runs, {paused}, following the advice", runs, "current", True, True),
        Configuration(
            f"{n} runs, {paused}, following advice blind to the cache", runs, "blind", True
        ),
    ]


def report(
    configuration: Configuration,
    figures: Mapping[str, Figures],
    whole: Mapping[str, Figures],
    trimmed: Mapping[str, Figures],
) -> None:
    """The configuration's figures, summed over its runs (`figures`, `whole` and `trimmed` by
    run name), each run's too when verbose."""
    runs, verbose = configuration.runs, configuration.verbose
    labels = {run.name: f"  {run.name[:40]} ({run.window:,})" for run in runs}
    totals = {
        "contextd": combined([figures[run.name] for run in runs]),
        "whole history": combined([whole[run.name] for run in runs]),
        "trim_messages(last)": combined([trimmed[run.name] for run in runs]),
    }
    print(f"\n{configuration.label}\n{HEADER}")
    for run in runs if verbose else ():
        print(row(labels[run.name], figures[run.name]))
    for name, total in totals.items():
        print(row(name, total))
    prefix = totals["contextd"]["prefix"]
    named = prefix["named_breaks"]
    causes = ", ".join(f"{cause} {count}" for cause, count in named.items())
    print(
        f"prefix breaks: {prefix['left_history_calls']} calls left the previous call's history"
        f" early; contextd named {sum(named.values())} ({causes or 'none'})"
    )
    print(CACHE_HEADER)
    for run in runs if verbose else ():
        print(cache_row(labels[run.name], figures[run.name]))
    print(cache_row("contextd", totals["contextd"]))
    print(GROUNDING_HEADER)
    for run in runs if verbose else ():
        print(grounding_row(labels[run.name], figures[run.name], acceptance=True))
    for name, total in totals.items():
        print(grounding_row(name, total, acceptance=name == "contextd"))


def main(argv: Sequence[str]) -> None:
    loaded = load_runs([Path(a) for a in argv])
    runs = [Run(name, items, *share_window(items)) for name, items in loaded.items()]
    reserve = min(DEFAULT_RESERVE, PROFILE_WINDOW // 2)
    profile = Run("all-runs", concatenated(loaded), PROFILE_WINDOW - reserve, PROFILE_WINDOW)
    print(GROUNDING_LEGEND)
    print(CACHE_LEGEND)
    figures: dict[tuple[bool, str], dict[str, Figures]] = {}
    # The logs with pauses and without go to databases of their own, each under the name the
    # bench has always given it: the ids the service derives from a session's name (a
    # compaction's, named where a context leaves the compacted facts out) are in its contexts,
    # and so in their tokens.
    for pauses, variants in ((False, ["blind", "never"]), (True, ["blind"])):
        clock = SimulatedClock()
        with (
            bench_database("contextd_bench_replay") as url,
            TestClient(
                # Evaluations of a whole run answered at once, however long.
                create_app(
                    Settings(database_url=url, api_keys=[], evaluate_sync_calls=10**6),
                    clock=clock,
                )
            ) as client,
        ):
            logs = [*runs, profile] if not pauses else runs
            for run in logs:
                asked = variants if run is not profile else []
                timing = Timing(clock, pauses)
                for variant, each in evaluated(client, run, timing=timing, variants=asked).items():
                    figures.setdefault((pauses, variant), {})[run.name] = each
    whole, trimmed = {}, {}
    for run in [*runs, profile]:
        whole[run.name], trimmed[run.name] = baselines(run)
    for configuration in configurations(runs, profile):
        report(
            configuration, figures[(configuration.pauses, configuration.variant)], whole, trimmed
        )


if __name__ == "__main__":
    main(sys.argv[1:])
