"""A retraction hides an item with what normalization pairs it with (`call_key`, `answer_key`):
a call with its outputs, an output with its call, and nothing that merely shares a call_id."""

from __future__ import annotations

from typing import Any

from app.domain.facts import EMPTY_FOLD, ActiveHistory, FactRecord, fold_facts, plan_retraction
from tests.builders import tool_call, tool_output, user_msg


def _active(items: list[dict[str, Any]]) -> ActiveHistory:
    log = [FactRecord(n, item["type"], item, {}, None, 1) for n, item in enumerate(items, 1)]
    fold = fold_facts(EMPTY_FOLD, log, last_seq=len(log))
    return ActiveHistory.of(
        fold, session_pk=1, encoding="o200k_base", context_window=8_000, unit=None
    )


def test_a_call_and_its_outputs_are_hidden_together_and_nothing_else() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c1", "name": "apply", "input": "x"}
    active = _active(
        [
            user_msg("go"),
            tool_call("c1"),  # seq 2: a function call
            tool_output("c1", "first"),  # 3: its output
            custom,  # 4: another family's call under the same call_id
            tool_call("c2"),  # 5
            tool_output("c2", "second"),  # 6
        ]
    )

    by_call = plan_retraction(active, 2)
    by_output = plan_retraction(active, 6)
    alone = plan_retraction(active, 4)

    assert [seq for seq, _ in by_call.hidden] == [2, 3]
    assert [seq for seq, _ in by_output.hidden] == [5, 6]
    assert [seq for seq, _ in alone.hidden] == [4]
    assert by_call.fact.item == {"type": "contextd.retraction", "seqs": [2, 3], "requested": 2}
