"""Properties of normalization over random histories and over every real trajectory.

After normalization every call has exactly one output of its family after it and no output lacks
its call; a second pass changes nothing and reports nothing; every item the report does not name
comes back as the very object that went in, in its original order.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.items import OUTPUT_TYPES, Item, item_type
from app.domain.normalize import (
    DEFAULT_TRUNCATION_POLICY,
    NormalizeReport,
    NormalizeResult,
    TruncationPolicy,
    find_pairing_violations,
    normalize_history,
)
from app.domain.truncation import (
    TruncationMode,
    omission_marker,
    truncate_text,
)

TRAJECTORIES = sorted((Path(__file__).parents[1] / "data" / "trajectories").glob("*.jsonl"))
SEED = 20_240_611


def quarter_bytes(text: str) -> int:
    """A stand-in tokenizer: one token per started four UTF-8 bytes."""
    return (len(text.encode()) + 3) // 4


texts = st.text(st.characters(codec="utf-8"), max_size=40)
long_texts = st.text(st.characters(codec="utf-8"), max_size=300)
# Few call ids, so that random outputs often answer, repeat or miss a call.
call_ids = st.sampled_from(["a", "b", "c", "a", "b", "c", None, ""])
item_ids = st.sampled_from([None, None, "fc_1", "fc_2", "ctc_1", "lsh_1"])
media_parts = st.sampled_from(
    [
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_audio", "audio_url": "data:audio/wav;base64,AAAA"},
    ]
)
text_parts = st.builds(lambda text: {"type": "input_text", "text": text}, long_texts)
outputs = st.one_of(
    long_texts,
    st.lists(st.one_of(text_parts, media_parts), max_size=4),
    st.just({"not": "a valid output"}),
)


def _without_none(**fields: Any) -> Item:
    return {key: value for key, value in fields.items() if value is not None}


messages = st.builds(
    lambda role, text, extra: {
        "type": "message",
        "role": role,
        "content": [{"type": "input_text", "text": text}, *extra],
    },
    st.sampled_from(["user", "assistant", "developer", "system"]),
    texts,
    st.lists(media_parts, max_size=2),
)
calls = st.builds(
    lambda kind, call_id, item_id, arguments: _without_none(
        type=kind, id=item_id, call_id=call_id, name="sh", arguments=arguments, input=arguments
    ),
    st.sampled_from(["function_call", "custom_tool_call", "function_call", "local_shell_call"]),
    call_ids,
    item_ids,
    st.sampled_from(["{}", '{"cmd": "ls"}', "{not json"]),
)
tool_outputs = st.builds(
    lambda kind, call_id, output, server: _without_none(
        type=kind, call_id=call_id, output=output, execution="server" if server else None
    ),
    st.sampled_from(["function_call_output", "function_call_output", "custom_tool_call_output"]),
    call_ids,
    outputs,
    st.sampled_from([False, False, False, True]),
)
other_items = st.one_of(
    st.builds(lambda: {"type": "reasoning", "id": "rs_1", "summary": []}),
    st.builds(lambda: {"type": "configuration_update", "reasoning": {"effort": "low"}}),
    st.builds(
        lambda result: {"type": "image_generation_call", "id": "ig_1", "result": result},
        st.sampled_from(["", "iVBOR"]),
    ),
    st.builds(lambda kind: {"type": kind}, st.sampled_from(["mystery", "compaction_trigger"])),
    st.one_of(st.none(), st.integers(), texts, st.just(["not", "an", "item"])),
)
items = st.one_of(messages, calls, calls, tool_outputs, tool_outputs, tool_outputs, other_items)


@st.composite
def damaged_histories(draw: st.DrawFn) -> list[Any]:
    """Well-formed turns of parallel calls, then items dropped, moved, repeated and inserted."""
    history: list[Any] = []
    for turn in range(draw(st.integers(min_value=1, max_value=5))):
        history.append({"type": "message", "role": "user", "content": f"turn {turn}"})
        families = draw(st.lists(st.sampled_from(["function", "custom", "shell"]), max_size=3))
        answers = []
        for number, family in enumerate(families):
            call_id = f"{turn}.{number}"
            call_type, output_type = {
                "function": ("function_call", "function_call_output"),
                "custom": ("custom_tool_call", "custom_tool_call_output"),
                "shell": ("local_shell_call", "function_call_output"),
            }[family]
            history.append({"type": call_type, "call_id": call_id, "name": "sh", "arguments": "{}"})
            answers.append({"type": output_type, "call_id": call_id, "output": draw(long_texts)})
        history.extend(draw(st.permutations(answers)))
        history.append({"type": "message", "role": "assistant", "content": f"done {turn}"})
    damages = st.tuples(
        st.sampled_from(["drop", "move", "repeat", "insert"]),
        st.integers(min_value=0, max_value=10_000),
        st.integers(min_value=0, max_value=10_000),
    )
    for damage, source, target in draw(st.lists(damages, max_size=6)):
        if not history:
            break
        source %= len(history)
        target %= len(history)
        match damage:
            case "drop":
                del history[source]
            case "move":
                history.insert(target, history.pop(source))
            case "repeat":
                history.insert(target, copy.deepcopy(history[source]))
            case "insert":
                history.insert(target, draw(items))
    return history


policies = st.sampled_from(
    [
        TruncationPolicy(),
        TruncationPolicy(limit=5),
        TruncationPolicy(limit=30),
        TruncationPolicy(mode="bytes", limit=60),
    ]
)
modalities = st.sampled_from(
    [frozenset({"text"}), frozenset({"text", "image"}), frozenset({"text", "image", "audio"})]
)


def normalize_twice(
    history: list[Any],
    *,
    policy: TruncationPolicy = DEFAULT_TRUNCATION_POLICY,
    input_modalities: frozenset[str] = frozenset({"text", "image"}),
    harness_authored: list[bool] | None = None,
) -> NormalizeResult:
    """Normalize, check the pairing invariant and idempotence, and return the first result."""
    metadata = [{"harness_authored": flag} for flag in harness_authored or []]
    result = normalize_history(
        history,
        count_tokens=quarter_bytes,
        input_modalities=input_modalities,
        truncation=policy,
        item_metadata=metadata,
    )
    assert find_pairing_violations(result.items) == []
    # The first pass admitted these configuration updates, so the harness wrote them.
    admitted = [{"harness_authored": True} for _ in result.items]
    again = normalize_history(
        result.items,
        count_tokens=quarter_bytes,
        input_modalities=input_modalities,
        truncation=policy,
        item_metadata=admitted,
    )
    assert again.items == result.items
    assert again.report.as_dict() == NormalizeReport().as_dict()
    return result


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.lists(items, min_size=4, max_size=30), damaged_histories()),
    policies,
    modalities,
    st.lists(st.booleans(), max_size=25),
)
def test_normalized_random_history_is_paired_stable_and_reports_every_change(
    history: list[Any],
    policy: TruncationPolicy,
    input_modalities: frozenset[str],
    harness_authored: list[bool],
) -> None:
    history = [copy.deepcopy(item) for item in history]  # distinct objects, for identity checks
    before = copy.deepcopy(history)
    result = normalize_twice(
        history,
        policy=policy,
        input_modalities=input_modalities,
        harness_authored=harness_authored,
    )
    report = result.report
    assert history == before

    assert len(result.items) == (
        len(history)
        - len(report.excluded)
        - len(report.removed_orphans)
        - len(report.deduplicated_outputs)
        + len(report.synthesized_outputs)
    )
    source_of = {id(item): index for index, item in enumerate(history) if isinstance(item, dict)}
    synthesized = {entry.index for entry in report.synthesized_outputs}
    stripped = {entry.index for entry in report.stripped_media}
    truncated_calls = {entry.call_id for entry in report.truncated_outputs}
    for index, item in enumerate(result.items):
        if id(item) not in source_of and index not in synthesized | stripped:
            assert item_type(item) in OUTPUT_TYPES
            assert item.get("call_id") in truncated_calls
    moved = {entry.from_index for entry in report.reordered_outputs}
    kept_in_order = [
        source_of[id(item)]
        for item in result.items
        if id(item) in source_of and source_of[id(item)] not in moved
    ]
    assert kept_in_order == sorted(kept_in_order)
    assert report.is_empty() == (result.items == tuple(history))


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(codec="utf-8"), max_size=400),
    st.integers(min_value=0, max_value=120),
    st.sampled_from(["tokens", "bytes"]),
)
def test_truncated_text_keeps_a_head_and_a_tail_within_budget(
    text: str, budget: int, mode: TruncationMode
) -> None:
    measure = quarter_bytes if mode == "tokens" else (lambda part: len(part.encode()))
    cut = truncate_text(text, budget=budget, mode=mode, count_tokens=quarter_bytes)
    assert truncate_text(cut, budget=budget, mode=mode, count_tokens=quarter_bytes) is cut
    if cut is text:
        return
    floor = measure(text[:1] + omission_marker(999_999_999_999, mode))
    assert measure(cut) <= max(budget, floor)
    head, _, rest = cut.partition("[… ")
    tail = rest.partition(" omitted …]")[2]
    assert head
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + len(tail) < len(text)


def _damaged_copies(history: list[Item], rng: random.Random) -> list[list[Item]]:
    """Prefixes of the history with items dropped, outputs moved and outputs repeated."""
    copies = []
    for _ in range(12):
        damaged = [item for item in history[: rng.randint(0, len(history))] if rng.random() > 0.15]
        outputs = [item for item in damaged if item_type(item) in OUTPUT_TYPES]
        for output in rng.sample(outputs, k=min(len(outputs), rng.randint(0, 3))):
            damaged.remove(output)
            damaged.insert(rng.randint(0, len(damaged)), output)
        for output in rng.sample(outputs, k=min(len(outputs), rng.randint(0, 2))):
            damaged.insert(rng.randint(0, len(damaged)), copy.deepcopy(output))
        copies.append(damaged)
    return copies


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_damaged_trajectories_normalize_to_paired_stable_histories(path: Path) -> None:
    history = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rng = random.Random(f"{SEED}:{path.name}")
    normalize_twice(history)
    for damaged in _damaged_copies(history, rng):
        normalize_twice(damaged, policy=TruncationPolicy(limit=rng.choice([50, 500, 10_000])))
