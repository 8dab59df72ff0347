"""Next-action grounding, measured live over HTTP on PostgreSQL: the model output appended after a
session-mode assembly grades that assembly, once, on its plan and in Prometheus by unit."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import REGISTRY

from tests.builders import assistant_msg, system_msg, tool_call, tool_output, user_msg
from tests.statements import statements_matching

GOAL = "Make the CSV export write UTF-8."


def _counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _append(client: TestClient, session_id: str, items: list[dict[str, Any]], **body: Any) -> None:
    body = {"unit": "coder", **body}
    appended = client.post(f"/sessions/{session_id}/items", json={"items": items, **body})
    assert appended.status_code == 201, appended.text


def _assemble(client: TestClient, session_id: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/assemble", json={"session_id": session_id, "unit": "coder", **body})
    assert answer.status_code == 201, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _grounding(client: TestClient, assembly_id: str) -> Any:
    stored = client.get(f"/assemblies/{assembly_id}")
    assert stored.status_code == 200, stored.text
    return stored.json()["grounding"]


def _start(client: TestClient, session_id: str) -> None:
    created = client.post("/sessions", json={"session_id": session_id})
    assert created.status_code == 201, created.text
    client.put(f"/sessions/{session_id}/goal", json={"text": GOAL})
    _append(
        client,
        session_id,
        [
            user_msg("The export garbles names like Müller."),
            tool_call("c1", "shell", '{"cmd": "grep -rn open_export src/"}'),
            tool_output("c1", "src/csv_export/writer.py:12: def open_export(path_name):"),
        ],
    )


def test_the_output_after_an_assembly_grades_it_on_its_plan_and_in_prometheus(
    client: TestClient, session_id: str
) -> None:
    _start(client, session_id)
    assembly = _assemble(client, session_id)
    assert _grounding(client, assembly["assembly_id"]) is None  # no output yet
    before = {
        outcome: _counter("contextd_next_action_identifiers_total", unit="coder", outcome=outcome)
        for outcome in ("visible", "recallable", "neither")
    }
    calls = _counter("contextd_next_action_calls_total", unit="coder", all_visible="true")

    # The model reads the file it found; `encoding_name` is new, the others the history held.
    action = tool_call(
        "c2",
        "shell",
        '{"cmd": "sed -n 1,40p src/csv_export/writer.py # open_export encoding_name"}',
    )
    _append(client, session_id, [action, tool_output("c2", "def open_export(path_name): ...")])

    assert _grounding(client, assembly["assembly_id"]) == {
        "needed": 4,
        "visible": 4,
        "recallable": 0,
        "neither": 0,
        "all_visible": True,
        "misses_by_form": {},
        "missed": [],
        "ungraded": 0,
    }
    assert {
        outcome: _counter("contextd_next_action_identifiers_total", unit="coder", outcome=outcome)
        - before[outcome]
        for outcome in before
    } == {"visible": 4, "recallable": 0, "neither": 0}
    assert (
        _counter("contextd_next_action_calls_total", unit="coder", all_visible="true") == calls + 1
    )


def test_what_a_compaction_summarized_is_graded_recallable_by_its_form(
    client: TestClient, session_id: str
) -> None:
    _start(client, session_id)
    # A long stretch of work, then a compaction that keeps only the newest turn verbatim.
    for turn in range(2, 8):
        _append(
            client,
            session_id,
            [
                tool_call(f"c{turn}", "shell", f'{{"cmd": "cat notes_{turn}.txt"}}'),
                tool_output(f"c{turn}", f"helper_value_{turn} = {turn}\n" + "filler " * 400),
            ],
        )
    _append(client, session_id, [assistant_msg("Looked at every note.")])
    compacted = client.post(
        "/compact",
        json={"session_id": session_id, "strategy": "clear_tool_results"},
    )
    assert compacted.status_code == 201, compacted.text
    assembly = _assemble(client, session_id)
    misses = _counter("contextd_next_action_misses_total", unit="coder", form="cleared")

    # The model goes back to a value only a cleared output showed.
    _append(client, session_id, [tool_call("c9", "shell", '{"cmd": "echo helper_value_3"}')])

    grounding = _grounding(client, assembly["assembly_id"])
    assert grounding == {
        "needed": 1,
        "visible": 0,
        "recallable": 1,
        "neither": 0,
        "all_visible": False,
        "misses_by_form": {"cleared": 1},
        "missed": ["helper_value_3"],
        "ungraded": 0,
    }
    assert _counter("contextd_next_action_misses_total", unit="coder", form="cleared") == (
        misses + 1
    )


def test_an_assembly_is_graded_once_and_only_against_the_output_that_followed_it(
    client: TestClient, session_id: str
) -> None:
    _start(client, session_id)
    first = _assemble(client, session_id)
    _append(client, session_id, [assistant_msg("Checking src/csv_export/writer.py now.")])
    graded = _grounding(client, first["assembly_id"])
    # The path, its file name and the package name in it.
    assert graded is not None
    assert (graded["needed"], graded["visible"]) == (3, 3)

    # A second output without a new assembly leaves the first one's grade as it was.
    _append(client, session_id, [assistant_msg("Still on open_export.")])
    assert _grounding(client, first["assembly_id"]) == graded

    # Output of another unit does not grade this lineage's assembly.
    second = _assemble(client, session_id)
    _append(client, session_id, [assistant_msg("open_export again")], unit="reviewer")
    assert _grounding(client, second["assembly_id"]) is None
    # A replayed append (same idempotency key) grades nothing twice.
    _append(client, session_id, [assistant_msg("open_export")], idempotency_key="k1")
    assert _grounding(client, second["assembly_id"])["needed"] == 1
    replayed = client.post(
        f"/sessions/{session_id}/items",
        json={"items": [assistant_msg("open_export")], "idempotency_key": "k1", "unit": "coder"},
    )
    assert replayed.status_code == 200
    assert _grounding(client, second["assembly_id"])["needed"] == 1


def test_a_session_whose_model_keeps_needing_what_was_hidden_compacts_to_keep_more(
    client: TestClient, session_id: str
) -> None:
    created = client.post("/sessions", json={"session_id": session_id, "context_window": 9_000})
    assert created.status_code == 201, created.text
    client.put(f"/sessions/{session_id}/goal", json={"text": GOAL})
    for turn in range(6):
        _append(
            client,
            session_id,
            [
                tool_call(f"c{turn}", "shell", f'{{"cmd": "cat notes_{turn}.txt"}}'),
                tool_output(f"c{turn}", f"value_of_{turn} = {turn}\n" + "filler " * 800),
            ],
        )

    def target() -> int:
        planned = client.post(
            "/compact", json={"session_id": session_id, "strategy": "summary", "dry_run": True}
        )
        assert planned.status_code == 200, planned.text
        value: int = planned.json()["target_tokens"]
        return value

    def window_and_pinned() -> tuple[int, int]:
        context = client.get(f"/sessions/{session_id}/context-window").json()
        pinned = sum(v for k, v in context["by_source_class"].items() if k != "history")
        return context["window_tokens"], pinned

    window, pinned_before = window_and_pinned()
    before = target()
    cleared = client.post(
        "/compact",
        json={"session_id": session_id, "strategy": "clear_tool_results", "params": {}},
    )
    assert cleared.status_code == 201, cleared.text
    # Five calls in a row go back to values only the cleared outputs showed.
    for turn in range(5):
        _assemble(client, session_id)
        _append(
            client,
            session_id,
            [
                tool_call(f"r{turn}", "shell", f'{{"cmd": "echo value_of_{turn}"}}'),
                tool_output(f"r{turn}", "filler " * 1_400),
            ],
        )
    # Its compactions now keep the context halfway between the watermarks (0.25 and 0.9): the
    # target is that share of the window less what is pinned beside the history.
    _, pinned_after = window_and_pinned()
    assert target() - before == (int(0.575 * window) - pinned_after) - (
        int(0.25 * window) - pinned_before
    )


def _fact_reads_grading_one_action(client: TestClient, session_id: str, *, asides: int) -> int:
    """Statements reading facts while an output is appended and grades the assembly before it,
    which elides one range per system message normalization left out (`asides` of them)."""
    _start(client, session_id)
    for n in range(asides):
        _append(
            client,
            session_id,
            [
                system_msg(f"aside {n}"),
                user_msg(f"step {n}: keep going"),
            ],
        )
    assembly = _assemble(client, session_id)
    assert len(assembly["elided"]) == asides, assembly["elided"]
    engine = client.app.state.engine  # type: ignore[attr-defined]
    with statements_matching(engine, r"\bFROM facts\b") as reads:
        _append(client, session_id, [assistant_msg("Done with src/csv_export/writer.py.")])
    assert _grounding(client, assembly["assembly_id"]) is not None
    return len(reads)


def test_grading_reads_the_elided_facts_in_one_statement_however_many_ranges(
    client: TestClient, session_id: str
) -> None:
    few = _fact_reads_grading_one_action(client, session_id, asides=2)
    many = _fact_reads_grading_one_action(client, f"{session_id}-many", asides=8)
    assert few == many


def test_an_output_naming_a_hundred_thousand_identifiers_is_graded_on_the_first_five_thousand(
    client: TestClient, session_id: str
) -> None:
    """The audit's output: 100,000 identifiers after an assembly over a 1 MB tool output. The
    grade says how many it left ungraded; every identifier the output and the history share
    among those graded is counted."""
    names = [f"symbol_{n:06d}" for n in range(100_000)]
    _start(client, session_id)
    _append(
        client,
        session_id,
        [
            tool_call("big", "shell", '{"cmd": "nm build/lib.so"}'),
            tool_output("big", " ".join(names[:70_000])),
        ],
    )
    assembly = _assemble(client, session_id)
    _append(client, session_id, [assistant_msg(" ".join(names))])
    grounding = _grounding(client, assembly["assembly_id"])
    assert grounding is not None
    # Each name is two identifiers (`symbol_000001`, and the number `000001`): 200,000.
    assert (grounding["needed"], grounding["ungraded"]) == (5_000, 195_000)
    assert (
        grounding["needed"] == grounding["visible"] + grounding["recallable"] + grounding["neither"]
    )
