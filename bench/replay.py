"""The agent loop, replayed: what a whole session costs and what the model still sees.

For every run in `tests/data/trajectories` (or the directories given), a session whose usable
window is `WINDOW_SHARE` of the run's tokens (at least `MIN_WINDOW`); its `context_window` is the
model window whose usable part (less the server's output reserve) that is.
The goal is the run's first user message. Before every run of model-output items (what the model
produced in one call: assistant messages, reasoning, tool calls), the items since the previous
call are appended and session-mode `/assemble` answers; whenever `advice.should_compact`,
`/compact` runs with the recommended strategy and `/assemble` answers again (as
`contextd_client`'s runtime does), and that context is what the call sends.

Per call, from the `messages` a provider would receive (Responses form):
- input: tokens of every message's visible text (o200k_base);
- reused: tokens of the leading messages byte-identical (canonical JSON) to the previous call's,
  what a provider's prompt cache can serve; beside it, the service's own
  `cache.reused_prefix_tokens`, which must agree within a few percent;
- fresh = input − reused; cost = fresh + `CACHED_PRICE` × reused (a cached token at a tenth);
- the goal present (its text a substring of the visible text), pairing valid
  (`find_pairing_violations`), over budget (input above the usable window), and the tokens of
  the goal's restatement at the end; and whether assembly had to cut the history (it no longer
  fit: the oldest items left the context without a compaction's record of them);
- next-action grounding (`app.domain.grounding`): the identifiers the call's own output went on to
  use that the history before it holds (less the goal's), and how many of them the messages show
  (visible) or an `elided` fact holds (recallable). For contextd, also: the calls whose context
  hides anything, how many of them name every elided entry's first seq in the visible text, and
  how many recallable identifiers `POST /sessions/{id}/recall` hands back over the entry's range.

In the same run, two baselines over the same calls: the whole normalized history (no management),
and LangChain's `trim_messages` (strategy `last`, `include_system`, `start_on="human"`) to the
usable window. Configurations: a runtime that follows the advice; the same with advice blind to
the cache (weighed by tokens alone, as before the advice priced it); one that never compacts
(what session-mode assembly's stable cuts make of an overflowing history); the realistic
profile, every run concatenated into one session under a 128k window, following the advice;
and the first two again with idle gaps injected.

Every call is also served by a simulated provider cache on the replay's clock
(`bench.provider_cache`): its cost in the provider's terms, the service's predicted reuse
against it, and the service's class of each call it served less than predicted. After each
run without pauses, `POST /sessions/{id}/evaluate` replays the session's log under its own
settings (following the advice or not, as the run did) and the bench counts the runs it
replayed with the same calls and compactions (its clock is the log's, which holds no pauses).
Run: `make bench` (or `.venv/bin/python -m bench.replay [DIR ...]`).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi.testclient import TestClient
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from app.domain.cache_simulation import SimulatedProvider
from app.domain.grounding import (
    Grounding,
    ground,
    item_text,
    items_text,
    names_every_seq,
    needed_identifiers,
)
from app.domain.items import (
    CALL_TYPES,
    OUTPUT_TYPES,
    Item,
    is_model_output,
    item_type,
    visible_text,
)
from app.domain.normalize import find_pairing_violations, normalize_history
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
    CacheTally,
    SimulatedClock,
    Timing,
    session_terms,
)

WINDOW_SHARE = 0.3
MIN_WINDOW = 4_000
DEFAULT_RESERVE = 16_000
CACHED_PRICE = 0.1

count_tokens = token_counter("o200k_base")

Client = httpx.Client | TestClient
"""The service over HTTP, or in this process."""


def call_points(items: Sequence[Item]) -> list[int]:
    """Positions where a model call starts: the first item of each run of model output."""
    return [
        n
        for n, item in enumerate(items)
        if is_model_output(item) and (n == 0 or not is_model_output(items[n - 1]))
    ]


def tokens_of(messages: Sequence[Item]) -> list[int]:
    return [count_tokens(visible_text(message)) for message in messages]


@dataclass
class Tally:
    """Totals over calls, for one manager."""

    calls: int = 0
    input: int = 0
    reused: int = 0
    service_reused: int = 0
    compactions: int = 0
    goal_present: int = 0
    paired: int = 0
    over_budget: int = 0
    restated: int = 0
    cut: int = 0
    needing: int = 0
    needed: int = 0
    visible: int = 0
    recallable: int = 0
    all_visible: int = 0
    hiding: int = 0
    seqs_named: int = 0
    recall_checked: int = 0
    recall_confirmed: int = 0
    recall_unchecked: int = 0
    online_needing: int = 0
    online_needed: int = 0
    online_visible: int = 0
    online_all_visible: int = 0
    breaks: Counter[str] = field(default_factory=Counter)
    """The service's named prefix breaks (`cache.break`), by cause."""
    broken: int = 0
    """Calls whose messages left the previous call's before the end of its history."""
    previous: list[bytes] = field(default_factory=list)

    def call(
        self,
        messages: Sequence[Item],
        *,
        goal: str,
        window: int,
        grounding: Grounding,
        service_reused: int = 0,
        restated: int = 0,
        cut: bool = False,
    ) -> int:
        """Add one call; returns how many leading messages it shares with the call before."""
        encoded = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        sizes = tokens_of(messages)
        shared = 0
        for before, now in zip(self.previous, encoded, strict=False):
            if before != now:
                break
            shared += 1
        self.previous = encoded
        total = sum(sizes)
        self.calls += 1
        self.input += total
        self.reused += sum(sizes[:shared])
        self.service_reused += service_reused
        self.goal_present += goal in "\n".join(visible_text(m) for m in messages)
        self.paired += not find_pairing_violations(list(messages))
        self.over_budget += total > window
        self.restated += restated
        self.cut += cut
        self.needing += bool(grounding.needed)
        self.needed += len(grounding.needed)
        self.visible += len(grounding.visible)
        self.recallable += len(grounding.recallable)
        self.all_visible += bool(grounding.needed) and grounding.is_all_visible
        return shared

    def add(self, other: Tally) -> None:
        for name in (f.name for f in fields(self) if f.name != "previous"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self, label: str) -> str:
        calls = max(self.calls, 1)
        fresh = self.input - self.reused
        cost = fresh + CACHED_PRICE * self.reused
        service = (
            f"{self.service_reused / max(self.input, 1):7.1%}" if self.service_reused else "      —"
        )
        return (
            f"{label:<52} {self.calls:>5} {self.reused / max(self.input, 1):>7.1%} {service} "
            f"{fresh:>10,} {cost:>11,.0f} {100 * self.compactions / calls:>8.1f} "
            f"{self.goal_present / calls:>6.0%} {self.paired / calls:>6.0%} "
            f"{self.over_budget:>5} {self.restated / calls:>8.0f} {self.cut:>5}"
        )

    def grounding_row(self, label: str, *, acceptance: bool) -> str:
        needed = max(self.needed, 1)
        row = (
            f"{label:<52} {self.calls:>5} {self.needing:>5} {self.needed:>7,} "
            f"{self.visible / needed:>8.1%} {(self.visible + self.recallable) / needed:>8.1%} "
            f"{self.all_visible / max(self.needing, 1):>8.1%}"
        )
        if not acceptance:
            return row
        recall = f"{self.recall_confirmed}/{self.recall_checked}"
        online = (
            f"{self.online_visible / max(self.online_needed, 1):>8.1%} "
            f"{self.online_all_visible / max(self.online_needing, 1):>8.1%}"
        )
        return (
            f"{row} {self.hiding:>6} {self.seqs_named:>6} {recall:>9} {self.recall_unchecked:>9}"
            f" {online}"
        )

    def grade(self, grounding: Mapping[str, Any] | None) -> None:
        """Add the service's own grade of one call (`GET /assemblies/{id}`'s `grounding`)."""
        if grounding and grounding["needed"]:
            self.online_needing += 1
            self.online_needed += grounding["needed"]
            self.online_visible += grounding["visible"]
            self.online_all_visible += grounding["all_visible"]


HEADER = (
    f"{'':<52} {'calls':>5} {'reused':>7} {'service':>7} {'fresh':>10} {'cost':>11} "
    f"{'cmp/100':>8} {'goal':>6} {'paired':>6} {'over':>5} {'restate':>8} {'cut':>5}"
)
GROUNDING_HEADER = (
    f"{'grounding':<52} {'calls':>5} {'need':>5} {'needed':>7} {'visible':>8} {'+recall':>8} "
    f"{'all vis':>8} {'hiding':>6} {'seqs':>6} {'recall':>9} {'unchecked':>9} {'online':>8} "
    f"{'all vis':>8}"
)
GROUNDING_LEGEND = (
    "need: calls that need any identifier; needed: identifiers needed; visible, +recall: shares"
    " of them visible, visible or recallable; all vis: share of the calls that need any with"
    " all visible;\nhiding: calls with `elided` entries; seqs: those naming every entry's first"
    " seq; recall: recallable identifiers the recall search hands back, of those checked;"
    " unchecked: no recall endpoint;\nonline, all vis: the same two figures as the service graded"
    " each call itself when its output was appended (`GET /assemblies/{id}` `grounding`)"
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


@dataclass
class RunResult:
    name: str
    window: int
    managed: Tally
    whole: Tally
    trimmed: Tally
    served: CacheTally
    evaluated: bool | None = None
    """Whether `POST /sessions/{id}/evaluate`, the session's own settings, replayed the run
    with the same calls and compactions as this replay made (None: not asked; its clock is the
    log's, which holds no pauses)."""


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


@dataclass
class FactLog:
    """A session's raw log as the replay has read it, and the recall of what a context elides."""

    client: Client
    session_id: str
    texts: dict[int, str] = field(default_factory=dict)
    read_up_to: int = 0
    has_recall: bool = True
    recalled: dict[tuple[str, int, int], bool] = field(default_factory=dict)

    def elided_text(self, entry: Mapping[str, Any]) -> str:
        """The text of the facts of an `elided` entry's seq range, reading the log on to it."""
        first, last = int(entry["first_seq"]), int(entry["last_seq"])
        while self.read_up_to < last:
            page = self.client.get(
                f"/sessions/{self.session_id}/items",
                params={"after_seq": self.read_up_to, "limit": 1000},
            )
            page.raise_for_status()
            body = page.json()
            for fact in body["items"]:
                self.texts[fact["seq"]] = item_text(fact["item"])
                self.read_up_to = fact["seq"]
            if body["next_after_seq"] is None:  # the log ends here
                self.read_up_to = max(self.read_up_to, last)
        return "\n".join(self.texts[s] for s in range(first, last + 1) if s in self.texts)

    def recalls(self, identifier: str, entry: Mapping[str, Any]) -> bool | None:
        """Whether a recall search of the entry's range for `identifier` hands it back; None when
        the service has no recall endpoint."""
        first, last = int(entry["first_seq"]), int(entry["last_seq"])
        key = (identifier, first, last)
        if not self.has_recall:
            return None
        if key in self.recalled:
            return self.recalled[key]
        found, start = False, first
        while not found and start is not None:
            answer = self.client.post(
                f"/sessions/{self.session_id}/recall",
                json={"from_seq": start, "to_seq": last, "pattern": re.escape(identifier)},
            )
            if answer.status_code == 405 or (
                # The router's own 404 (no such path), not the service's (no such seq).
                answer.status_code == 404 and answer.json()["error"]["message"] == "Not Found"
            ):
                self.has_recall = False
                return None
            answer.raise_for_status()
            body = answer.json()
            found = any(identifier in match["text"] for match in body["matches"])
            start = body.get("next_from_seq")
        self.recalled[key] = found
        return found


def context_to_send(
    client: Client, session_id: str, *, follow_advice: bool, tally: Tally
) -> dict[str, Any]:
    """The assembly a runtime sends, as `contextd_client`'s runtime makes it: when the advice
    says to compact (and the runtime follows it), it compacts with the recommended strategy
    first, then assembles again if the compaction applied."""
    answer = client.post("/assemble", json={"session_id": session_id})
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    advice = body["advice"]
    if follow_advice and advice["should_compact"] and advice["recommended_strategy"]:
        compacted = client.post(
            "/compact", json={"session_id": session_id, "strategy": advice["recommended_strategy"]}
        )
        compacted.raise_for_status()
        if compacted.status_code == 201:  # else the context already made is the one sent
            tally.compactions += 1
            answer = client.post("/assemble", json={"session_id": session_id})
            answer.raise_for_status()
            body = answer.json()
    return body


def replay(
    client: Client,
    name: str,
    items: list[Item],
    *,
    window: int,
    context_window: int,
    timing: Timing,
    follow_advice: bool = True,
) -> RunResult:
    history = normalize_history(items, count_tokens=count_tokens).items
    goal = next(visible_text(i) for i in history if i.get("role") == "user")
    session_id = f"replay-{follow_advice:d}-{context_window}-{name}"[:200]
    client.post(
        "/sessions",
        json={
            "session_id": session_id,
            "context_window": context_window,
            "cache": dict(timing.session_cache),
        },
    ).raise_for_status()
    client.put(f"/sessions/{session_id}/goal", json={"text": goal}).raise_for_status()
    managed, whole, trimmed = Tally(), Tally(), Tally()
    provider, served = SimulatedProvider(PROVIDER), CacheTally()
    log = FactLog(client, session_id)
    appended = 0
    before = ""  # the text of the items before the call
    assembly_ids: list[str] = []
    missed: dict[str, bool] = {}
    history_end = 0  # where the previous call's history ended, in messages
    for number, point in enumerate(call_points(items)):
        timing.before_call(number)
        if point > appended:
            batch = {"items": items[appended:point], "idempotency_key": f"{session_id}-{point}"}
            client.post(f"/sessions/{session_id}/items", json=batch).raise_for_status()
            # System messages travel as instructions, beside whatever history a manager keeps.
            sent = [i for i in items[appended:point] if i.get("role") != "system"]
            before += "\n" + items_text(sent)
            appended = point
        end = next((n for n in range(point, len(items)) if not is_model_output(items[n])), None)
        needed = needed_identifiers(items_text(items[point:end]), history=before, goal=goal)
        body = context_to_send(client, session_id, follow_advice=follow_advice, tally=managed)
        assembly_ids.append(body["assembly_id"])
        call = provider.call(
            body["messages"], [i["tokens"] for i in body["items"]], at=timing.seconds
        )
        predicted = body["cache"]["reused_prefix_tokens"]
        served.call(call, predicted=predicted, terms=provider.terms)
        client.post(
            f"/sessions/{session_id}/usage",
            json={"assembly_id": body["assembly_id"], "cached_tokens": call.cached},
        ).raise_for_status()
        missed[body["assembly_id"]] = call.cached < predicted
        # A server that does not list what it elides yet elides nothing as far as this can tell.
        elided: list[dict[str, Any]] = body.get("elided", [])
        shown = items_text(body["messages"])
        grounding = ground(needed, shown=shown, elided=[log.elided_text(e) for e in elided])
        shared = managed.call(
            body["messages"],
            goal=goal,
            window=window,
            grounding=grounding,
            service_reused=body["cache"]["reused_prefix_tokens"],
            restated=sum(i["tokens"] for i in body["items"] if i["id"].endswith("#restated")),
            cut=any(r["signal"] == "history_cut" for r in body["advice"]["reasons"]),
        )
        if (broke := body["cache"].get("break")) is not None:
            managed.breaks[broke["cause"]] += 1
        managed.broken += shared < history_end
        history_end = 1 + max(
            (n for n, i in enumerate(body["items"]) if i["source"] == "history"), default=-1
        )
        managed.hiding += bool(elided)
        managed.seqs_named += bool(elided) and names_every_seq(
            shown, [e["first_seq"] for e in elided]
        )
        for identifier, index in grounding.recallable.items():
            recalled = log.recalls(identifier, elided[index])
            managed.recall_unchecked += recalled is None
            managed.recall_checked += recalled is not None
            managed.recall_confirmed += recalled is True
        so_far = normalize_history(items[:point], count_tokens=count_tokens).items
        kept = langchain_trim(so_far, window=window)
        whole.call(
            so_far,
            goal=goal,
            window=window,
            grounding=ground(needed, shown=items_text(so_far), elided=()),
        )
        trimmed.call(
            kept,
            goal=goal,
            window=window,
            grounding=ground(needed, shown=items_text(kept), elided=()),
        )
    # The last call's output too, so that the service grades every call.
    if items[appended:]:
        rest = {"items": items[appended:], "idempotency_key": f"{session_id}-end"}
        client.post(f"/sessions/{session_id}/items", json=rest).raise_for_status()
    for assembly_id in assembly_ids:
        stored = client.get(f"/assemblies/{assembly_id}")
        stored.raise_for_status()
        managed.grade(stored.json().get("grounding"))
        served.classified(stored.json().get("cache_outcome"), missed=missed[assembly_id])
    evaluated = None
    if not timing.pauses:
        # The runtime replayed here, as a variant: the session's own settings, following the
        # advice or not.
        variants = [] if follow_advice else [{"name": "never", "follow_advice": False}]
        answer = client.post(f"/sessions/{session_id}/evaluate", json={"variants": variants})
        answer.raise_for_status()
        own = answer.json()["variants"][-1]
        evaluated = (own["calls"], own["compactions"]) == (managed.calls, managed.compactions)
    return RunResult(name, window, managed, whole, trimmed, served, evaluated)


def load_runs(directories: Sequence[Path]) -> dict[str, list[Item]]:
    paths = (
        sorted(p for d in directories for p in d.glob("*.jsonl")) if directories else TRAJECTORIES
    )
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in paths
    }


def report(label: str, results: Sequence[RunResult], *, verbose: bool) -> None:
    print(f"\n{label}\n{HEADER}")
    totals = {"contextd": Tally(), "whole history": Tally(), "trim_messages(last)": Tally()}
    served = CacheTally()
    for result in results:
        if verbose:
            print(result.managed.row(f"  {result.name[:40]} ({result.window:,})"))
        totals["contextd"].add(result.managed)
        totals["whole history"].add(result.whole)
        totals["trim_messages(last)"].add(result.trimmed)
        served.add(result.served)
    for name, tally in totals.items():
        print(tally.row(name))
    breaks = totals["contextd"].breaks
    causes = ", ".join(f"{cause} {count}" for cause, count in sorted(breaks.items()))
    print(
        f"prefix breaks: {totals['contextd'].broken} calls left the previous call's history"
        f" early; contextd named {sum(breaks.values())} ({causes or 'none'})"
    )
    if asked := [result for result in results if result.evaluated is not None]:
        agreed = sum(bool(result.evaluated) for result in asked)
        print(
            f"evaluate (the session's own settings) replayed {agreed} of {len(asked)} runs with"
            " the same calls and compactions"
        )
    print(CACHE_HEADER)
    for result in results if verbose else ():
        print(result.served.row(f"  {result.name[:40]} ({result.window:,})"))
    print(served.row("contextd"))
    print(GROUNDING_HEADER)
    for result in results if verbose else ():
        run = f"  {result.name[:40]} ({result.window:,})"
        print(result.managed.grounding_row(run, acceptance=True))
    for name, tally in totals.items():
        print(tally.grounding_row(name, acceptance=name == "contextd"))


PROFILE_WINDOW = 128_000


@dataclass(frozen=True)
class Configuration:
    label: str
    runs: dict[str, list[Item]]
    follow: bool
    verbose: bool = False
    pauses: bool = False
    session_cache: Mapping[str, Any] = field(default_factory=lambda: session_terms(PROVIDER))


def configurations(runs: dict[str, list[Item]]) -> list[Configuration]:
    share = f"usable window {WINDOW_SHARE:.0%} of each run's tokens (at least {MIN_WINDOW:,})"
    paused = f"a {PAUSE_SECONDS / 60:.0f}-minute pause every {PAUSE_EVERY} calls"
    return [
        Configuration(f"{len(runs)} runs, {share}, following the advice", runs, True, True),
        Configuration(
            f"{len(runs)} runs, {share}, following advice blind to the cache",
            runs,
            True,
            session_cache=BLIND,
        ),
        Configuration(f"{len(runs)} runs, {share}, never compacting", runs, False),
        Configuration(
            f"the {len(runs)} runs as one session, a {PROFILE_WINDOW:,} window",
            {"all-runs": concatenated(runs)},
            True,
        ),
        Configuration(f"{len(runs)} runs, {paused}, following the advice", runs, True, True, True),
        Configuration(
            f"{len(runs)} runs, {paused}, following advice blind to the cache",
            runs,
            True,
            pauses=True,
            session_cache=BLIND,
        ),
    ]


def run_configuration(
    configuration: Configuration, windows: Mapping[str, tuple[int, int]]
) -> list[RunResult]:
    """Every run of `configuration` on a fresh database, the service in this process on the
    replay's clock."""
    clock = SimulatedClock()
    with (
        bench_database("contextd_bench_replay") as url,
        TestClient(
            # Evaluations of a whole run answered at once, however long.
            create_app(
                Settings(database_url=url, api_keys=[], evaluate_sync_calls=10**6), clock=clock
            )
        ) as client,
    ):
        timing = Timing(clock, configuration.pauses, configuration.session_cache)
        results = []
        for name, items in configuration.runs.items():
            window, context_window = windows.get(
                name, (PROFILE_WINDOW - min(DEFAULT_RESERVE, PROFILE_WINDOW // 2), PROFILE_WINDOW)
            )
            results.append(
                replay(
                    client,
                    name,
                    items,
                    window=window,
                    context_window=context_window,
                    timing=timing,
                    follow_advice=configuration.follow,
                )
            )
            clock.advance(PAUSE_SECONDS)  # the next run finds nothing of this one cached
    return results


def main(argv: Sequence[str]) -> None:
    runs = load_runs([Path(a) for a in argv])
    windows = {name: share_window(items) for name, items in runs.items()}
    print(GROUNDING_LEGEND)
    print(CACHE_LEGEND)
    for configuration in configurations(runs):
        results = run_configuration(configuration, windows)
        report(configuration.label, results, verbose=configuration.verbose)


if __name__ == "__main__":
    main(sys.argv[1:])
