"""History normalization, one rule per test, on small hand-built histories."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from app.domain.items import Item
from app.domain.normalize import (
    DEFAULT_TRUNCATION_POLICY,
    MEDIA_PLACEHOLDERS,
    SYNTHETIC_OUTPUT_TEXT,
    NormalizeReport,
    NormalizeResult,
    SynthesizedOutput,
    TruncationPolicy,
    find_pairing_violations,
    normalize_history,
    synthetic_output_id,
)

IMAGE_TEXT = MEDIA_PLACEHOLDERS["image"]
AUDIO_TEXT = MEDIA_PLACEHOLDERS["audio"]
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def quarter_bytes(text: str) -> int:
    """A stand-in tokenizer: one token per started four UTF-8 bytes."""
    return (len(text.encode()) + 3) // 4


def user_msg(text: str, *extra_parts: dict[str, Any]) -> Item:
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}, *extra_parts],
    }


def assistant_msg(text: str) -> Item:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def system_msg(text: str) -> Item:
    return {"type": "message", "role": "system", "content": [{"type": "input_text", "text": text}]}


def tool_call(
    call_id: str, name: str = "sh", arguments: str = "{}", item_id: str | None = None
) -> Item:
    item: Item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
    return item if item_id is None else {**item, "id": item_id}


def tool_output(call_id: str, output: Any = "ok") -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def custom_call(call_id: str, tool_input: str = "*** patch", item_id: str | None = None) -> Item:
    item: Item = {
        "type": "custom_tool_call",
        "call_id": call_id,
        "name": "apply_patch",
        "input": tool_input,
    }
    return item if item_id is None else {**item, "id": item_id}


def custom_output(call_id: str, output: Any = "done") -> Item:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def shell_call(call_id: str | None, item_id: str | None = None) -> Item:
    item: Item = {
        "type": "local_shell_call",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls"]},
    }
    if call_id is not None:
        item["call_id"] = call_id
    return item if item_id is None else {**item, "id": item_id}


def synthesized(call_id: str, output_id: str, kind: str = "function_call_output") -> Item:
    return {"type": kind, "id": output_id, "call_id": call_id, "output": SYNTHETIC_OUTPUT_TEXT}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def image_part() -> dict[str, Any]:
    return {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}


def audio_part() -> dict[str, Any]:
    return {"type": "input_audio", "audio_url": "data:audio/wav;base64,AAAA"}


def report(**lists: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A whole report dict: the lists given, every other list empty; an excluded entry given
    without a `detail` has none."""
    empty: dict[str, list[dict[str, Any]]] = NormalizeReport().as_dict()
    assert set(lists) <= set(empty)
    if "excluded" in lists:
        lists["excluded"] = [{"detail": None, **entry} for entry in lists["excluded"]]
    return {**empty, **lists}


def normalize(
    items: Sequence[Any],
    *,
    input_modalities: frozenset[str] = frozenset({"text", "image"}),
    truncation: TruncationPolicy = DEFAULT_TRUNCATION_POLICY,
    item_metadata: Sequence[Mapping[str, Any] | None] | None = None,
) -> NormalizeResult:
    return normalize_history(
        items,
        count_tokens=quarter_bytes,
        input_modalities=input_modalities,
        truncation=truncation,
        item_metadata=item_metadata,
    )


def test_normalize_returns_well_formed_history_as_it_came() -> None:
    items = [
        user_msg("list files"),
        {"type": "reasoning", "id": "rs_1", "summary": []},
        tool_call("a"),
        tool_call("b"),
        tool_output("a"),
        tool_output("b"),
        custom_call("c"),
        custom_output("c"),
        shell_call("d"),
        tool_output("d"),
        assistant_msg("done"),
    ]
    result = normalize(items)
    assert result.items == tuple(items)
    assert all(out is given for out, given in zip(result.items, items, strict=True))
    assert result.report.as_dict() == report()
    assert result.report.is_empty()


def test_normalize_excludes_system_messages_unknown_items_and_non_objects() -> None:
    items: list[Any] = [
        system_msg("you are an agent"),
        user_msg("hi"),
        {"type": "compaction_trigger"},
        {"content": "no type, no role"},
        "a bare string",
        ["a", "list"],
        None,
        assistant_msg("hello"),
    ]
    result = normalize(items)
    assert result.items == (user_msg("hi"), assistant_msg("hello"))
    assert result.report.as_dict() == report(
        excluded=[
            {"index": 0, "type": "message", "reason": "system_message"},
            {"index": 2, "type": "compaction_trigger", "reason": "unknown_type"},
            {"index": 3, "type": "unknown", "reason": "unknown_type"},
            {"index": 4, "type": "string", "reason": "not_an_object"},
            {"index": 5, "type": "array", "reason": "not_an_object"},
            {"index": 6, "type": "null", "reason": "not_an_object"},
        ]
    )


def test_normalize_admits_configuration_update_only_when_harness_authored() -> None:
    update = {"type": "configuration_update", "reasoning": {"effort": "high"}}
    items = [user_msg("hi"), update, dict(update), dict(update)]
    result = normalize(items, item_metadata=[None, {"harness_authored": True}, {}, None])
    assert result.items == (user_msg("hi"), update)
    assert result.report.as_dict() == report(
        excluded=[
            {"index": 2, "type": "configuration_update", "reason": "not_harness_authored"},
            {"index": 3, "type": "configuration_update", "reason": "not_harness_authored"},
        ]
    )


def test_normalize_excludes_call_without_call_id_but_keeps_local_shell_call_without_one() -> None:
    nameless_call = {"type": "function_call", "name": "sh", "arguments": "{}"}
    nameless_custom = {"type": "custom_tool_call", "call_id": "", "name": "x", "input": ""}
    items = [user_msg("go"), nameless_call, nameless_custom, shell_call(None)]
    result = normalize(items)
    assert result.items == (user_msg("go"), shell_call(None))
    assert result.report.as_dict() == report(
        excluded=[
            {"index": 1, "type": "function_call", "reason": "call_without_call_id"},
            {"index": 2, "type": "custom_tool_call", "reason": "call_without_call_id"},
        ]
    )


def test_normalize_synthesizes_output_after_unanswered_call() -> None:
    items = [user_msg("run it"), tool_call("a", item_id="fc_1"), user_msg("stop")]
    output_id = "fco_afd81941-09ad-5f34-8f3f-34fa082b5c52"
    result = normalize(items)
    assert result.items == (
        user_msg("run it"),
        tool_call("a", item_id="fc_1"),
        synthesized("a", output_id),
        user_msg("stop"),
    )
    assert result.report.as_dict() == report(
        synthesized_outputs=[{"call_id": "a", "id": output_id, "index": 2}]
    )


def test_normalize_synthesizes_each_parallel_output_right_after_its_call() -> None:
    items = [tool_call("a"), tool_call("b"), tool_call("c"), tool_output("b")]
    id_a = synthetic_output_id("function", call_item_id=None, call_id="a")
    id_c = synthetic_output_id("function", call_item_id=None, call_id="c")
    result = normalize(items)
    assert result.items == (
        tool_call("a"),
        synthesized("a", id_a),
        tool_call("b"),
        tool_call("c"),
        synthesized("c", id_c),
        tool_output("b"),
    )
    assert result.report.as_dict() == report(
        synthesized_outputs=[
            {"call_id": "a", "id": id_a, "index": 1},
            {"call_id": "c", "id": id_c, "index": 4},
        ]
    )


def test_synthetic_output_id_is_stable_and_derived_from_item_id_or_else_call_id() -> None:
    assert [
        synthetic_output_id("function", call_item_id="fc_1", call_id="c1"),
        synthetic_output_id("function", call_item_id="fc_1", call_id="other"),
        synthetic_output_id("custom", call_item_id="ctc_1", call_id="c1"),
        synthetic_output_id("function", call_item_id=None, call_id="c1"),
        synthetic_output_id("function", call_item_id="", call_id="c1"),
        synthetic_output_id("custom", call_item_id=None, call_id="c1"),
    ] == [
        "fco_afd81941-09ad-5f34-8f3f-34fa082b5c52",
        "fco_afd81941-09ad-5f34-8f3f-34fa082b5c52",
        "ctco_08540e92-880d-54e9-950f-5f3c9c21d8df",
        "fco_7e9c931e-2270-581d-9c1f-98ebc8e9f1b0",
        "fco_7e9c931e-2270-581d-9c1f-98ebc8e9f1b0",
        "ctco_720a16cd-9dbc-5f69-97a2-7a855b4eae71",
    ]


def test_normalize_synthesizes_custom_and_local_shell_outputs_in_their_own_family() -> None:
    items = [custom_call("p", item_id="ctc_1"), shell_call("s", item_id="lsh_1")]
    custom_id = "ctco_08540e92-880d-54e9-950f-5f3c9c21d8df"
    shell_id = "fco_ed7bd1c3-d2ad-5a99-9b66-e001201180b7"
    result = normalize(items)
    assert result.items == (
        custom_call("p", item_id="ctc_1"),
        synthesized("p", custom_id, kind="custom_tool_call_output"),
        shell_call("s", item_id="lsh_1"),
        synthesized("s", shell_id),
    )
    assert result.report.as_dict() == report(
        synthesized_outputs=[
            {"call_id": "p", "id": custom_id, "index": 1},
            {"call_id": "s", "id": shell_id, "index": 3},
        ]
    )


def test_normalize_removes_orphan_output() -> None:
    items = [user_msg("hi"), tool_output("ghost"), custom_output("ghost"), assistant_msg("ok")]
    result = normalize(items)
    assert result.items == (user_msg("hi"), assistant_msg("ok"))
    assert result.report.as_dict() == report(
        removed_orphans=[{"call_id": "ghost", "index": 1}, {"call_id": "ghost", "index": 2}]
    )


def test_normalize_never_pairs_an_output_with_a_call_of_another_family() -> None:
    items = [tool_call("x"), custom_output("x")]
    output_id = synthetic_output_id("function", call_item_id=None, call_id="x")
    result = normalize(items)
    assert result.items == (tool_call("x"), synthesized("x", output_id))
    assert result.report.as_dict() == report(
        synthesized_outputs=[{"call_id": "x", "id": output_id, "index": 1}],
        removed_orphans=[{"call_id": "x", "index": 1}],
    )


def test_normalize_moves_delayed_output_back_after_its_call_batch() -> None:
    items = [user_msg("go"), tool_call("a"), user_msg("are you done?"), tool_output("a")]
    result = normalize(items)
    assert result.items == (
        user_msg("go"),
        tool_call("a"),
        tool_output("a"),
        user_msg("are you done?"),
    )
    assert result.report.as_dict() == report(
        reordered_outputs=[{"call_id": "a", "from_index": 3, "to_index": 2}]
    )


def test_normalize_keeps_relative_order_of_moved_parallel_outputs() -> None:
    items = [
        tool_call("a"),
        tool_call("b"),
        tool_call("c"),
        tool_output("a"),
        assistant_msg("waiting"),
        tool_output("c"),
        tool_output("b"),
    ]
    result = normalize(items)
    assert result.items == (
        tool_call("a"),
        tool_call("b"),
        tool_call("c"),
        tool_output("a"),
        tool_output("c"),
        tool_output("b"),
        assistant_msg("waiting"),
    )
    assert result.report.as_dict() == report(
        reordered_outputs=[
            {"call_id": "c", "from_index": 5, "to_index": 4},
            {"call_id": "b", "from_index": 6, "to_index": 5},
        ]
    )


def test_normalize_moves_output_placed_before_its_call_after_it() -> None:
    items = [tool_output("a"), user_msg("hi"), tool_call("a")]
    result = normalize(items)
    assert result.items == (user_msg("hi"), tool_call("a"), tool_output("a"))
    assert result.report.as_dict() == report(
        reordered_outputs=[{"call_id": "a", "from_index": 0, "to_index": 2}]
    )


def test_normalize_keeps_only_the_first_of_duplicate_outputs() -> None:
    items = [tool_call("a"), tool_output("a", "first"), tool_output("a", "second"), user_msg("x")]
    result = normalize(items)
    assert result.items == (tool_call("a"), tool_output("a", "first"), user_msg("x"))
    assert result.report.as_dict() == report(deduplicated_outputs=[{"call_id": "a", "index": 2}])


def test_normalize_excludes_a_second_call_with_the_same_call_id() -> None:
    items = [tool_call("a", "first"), tool_output("a"), tool_call("a", "second")]
    result = normalize(items)
    assert result.items == (tool_call("a", "first"), tool_output("a"))
    assert result.report.as_dict() == report(
        excluded=[{"index": 2, "type": "function_call", "reason": "duplicate_call_id"}]
    )


def test_normalize_leaves_server_outputs_alone() -> None:
    server = {**tool_output("srv"), "execution": "server"}
    items = [user_msg("hi"), server, assistant_msg("ok")]
    result = normalize(items)
    assert result.items == tuple(items)
    assert result.report.is_empty()


def test_normalize_excludes_outputs_that_name_no_call() -> None:
    # A provider refuses an output without a call id; a non-string id names nothing either.
    missing = {"type": "function_call_output", "output": "named external output"}
    numeric = {"type": "custom_tool_call_output", "call_id": 7, "output": "x"}
    items = [user_msg("hi"), missing, numeric, assistant_msg("ok")]
    result = normalize(items)
    assert result.items == (user_msg("hi"), assistant_msg("ok"))
    assert result.report.as_dict() == report(
        excluded=[
            {"index": 1, "type": "function_call_output", "reason": "output_without_call_id"},
            {"index": 2, "type": "custom_tool_call_output", "reason": "output_without_call_id"},
        ]
    )


def test_normalize_strips_images_in_place_when_model_lacks_image_input() -> None:
    items = [
        user_msg("look", image_part(), text_part("and this")),
        tool_call("a"),
        tool_output("a", [text_part("screenshot:"), image_part()]),
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"},
    ]
    result = normalize(items, input_modalities=frozenset({"text"}))
    assert result.items == (
        user_msg("look", text_part(IMAGE_TEXT), text_part("and this")),
        tool_call("a"),
        tool_output("a", [text_part("screenshot:"), text_part(IMAGE_TEXT)]),
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": ""},
    )
    assert result.report.as_dict() == report(
        stripped_media=[
            {"index": 0, "kind": "image"},
            {"index": 2, "kind": "image"},
            {"index": 3, "kind": "image"},
        ]
    )


def test_normalize_strips_audio_by_default_and_keeps_images() -> None:
    items = [user_msg("listen", audio_part(), image_part())]
    result = normalize(items)
    assert result.items == (user_msg("listen", text_part(AUDIO_TEXT), image_part()),)
    assert result.report.as_dict() == report(stripped_media=[{"index": 0, "kind": "audio"}])


def test_normalize_strips_nothing_when_the_model_reads_every_medium() -> None:
    items = [
        user_msg("look", image_part(), audio_part()),
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"},
    ]
    result = normalize(items, input_modalities=frozenset({"text", "image", "audio"}))
    assert result.items == tuple(items)
    assert result.report.is_empty()


def test_normalize_truncates_long_tool_output_and_reports_exact_counts() -> None:
    long_text = ALPHABET * 4  # 26 tokens
    items = [
        tool_call("a"),
        tool_output("a", long_text),
        custom_call("b"),
        custom_output("b"),
    ]
    result = normalize(items, truncation=TruncationPolicy(limit=10))  # budget 12
    cut = "abcdefghijklmnopqrstuvwx[… 14 tokens omitted …]cdefghijklmnopqrstuvwxyz"
    assert result.items == (
        tool_call("a"),
        tool_output("a", cut),
        custom_call("b"),
        custom_output("b"),
    )
    assert result.report.as_dict() == report(
        truncated_outputs=[{"call_id": "a", "original_tokens": 26, "kept_tokens": 19}]
    )


def test_normalize_truncates_in_bytes_when_the_policy_says_so() -> None:
    items = [tool_call("a"), tool_output("a", ALPHABET * 4)]
    result = normalize(
        items, truncation=TruncationPolicy(mode="bytes", limit=40, serialization_margin=1)
    )
    assert result.items == (
        tool_call("a"),
        tool_output("a", "abcdefghijklmnopqrst[… 64 bytes omitted …]ghijklmnopqrstuvwxyz"),
    )
    assert result.report.as_dict() == report(
        truncated_outputs=[{"call_id": "a", "original_tokens": 26, "kept_tokens": 17}]
    )


def test_normalize_uses_the_per_item_token_limit_without_margin() -> None:
    long_text = ALPHABET * 4
    items = [
        tool_call("a"),
        tool_output("a", long_text),
        tool_call("b"),
        tool_output("b", long_text),
    ]
    result = normalize(items, item_metadata=[None, {"truncation_token_limit": 12}])
    cut = "abcdefghijklmnopqrstuvwx[… 14 tokens omitted …]cdefghijklmnopqrstuvwxyz"
    assert result.items == (tool_call("a"), tool_output("a", cut), tool_call("b"), items[3])
    assert result.report.as_dict() == report(
        truncated_outputs=[{"call_id": "a", "original_tokens": 26, "kept_tokens": 19}]
    )


def test_normalize_keeps_payloads_of_the_wrong_shape_out_and_reports_them() -> None:
    # Text that is not JSON is still text; an output that is an object, null or a list with
    # non-objects, a message whose content is a number, a call whose arguments are an object:
    # no format can send them as they are.
    items = [
        tool_call("a", arguments="{not json"),
        tool_output("a", {"unexpected": "object"}),
        tool_call("b"),
        tool_output("b", None),
        tool_call("c"),
        tool_output("c", [{"type": "mystery"}, 7, "bare"]),
        {"type": "message", "role": "user", "content": 42},
        {"type": "message", "content": "no role"},
        {"type": "function_call", "call_id": "d", "name": "sh", "arguments": {"cmd": "ls"}},
        assistant_msg("done"),
    ]
    ids = {c: synthetic_output_id("function", call_item_id=None, call_id=c) for c in "abc"}
    result = normalize(items)

    assert result.items == (
        tool_call("a", arguments="{not json"),
        synthesized("a", ids["a"]),
        tool_call("b"),
        synthesized("b", ids["b"]),
        tool_call("c"),
        synthesized("c", ids["c"]),
        assistant_msg("done"),
    )
    assert result.report.as_dict() == report(
        synthesized_outputs=[
            {"call_id": c, "id": ids[c], "index": index}
            for c, index in (("a", 1), ("b", 3), ("c", 5))
        ],
        excluded=[
            {"index": index, "type": kind, "reason": "malformed", "detail": detail}
            for index, kind, detail in (
                (
                    1,
                    "function_call_output",
                    "function_call_output output is an object, not text or a list of parts",
                ),
                (
                    3,
                    "function_call_output",
                    "function_call_output output is null, not text or a list of parts",
                ),
                (
                    5,
                    "function_call_output",
                    "function_call_output output part 1 is a number, not an object",
                ),
                (6, "message", "message content is a number, not text or a list of parts"),
                (7, "message", "message without role"),
                (8, "function_call", "function_call arguments is an object, not text"),
            )
        ],
    )


def test_normalize_never_mutates_its_input() -> None:
    items: list[Any] = [
        system_msg("rules"),
        user_msg("look", image_part()),
        tool_output("b"),
        tool_call("a"),
        assistant_msg("hm"),
        tool_output("a", "x" * 400),
        tool_output("a", "again"),
        tool_call("c"),
    ]
    before = copy.deepcopy(items)
    normalize(items, input_modalities=frozenset({"text"}), truncation=TruncationPolicy(limit=20))
    assert items == before


def test_normalize_applies_every_repair_in_one_pass() -> None:
    items: list[Any] = [
        system_msg("rules"),
        user_msg("look", image_part()),
        tool_output("b"),
        tool_call("a"),
        tool_call("b"),
        tool_call("c"),
        assistant_msg("hm"),
        tool_output("a", ALPHABET * 8),
        tool_output("a", "again"),
        tool_output("ghost"),
        {"type": "turn_marker"},
    ]
    id_c = synthetic_output_id("function", call_item_id=None, call_id="c")
    result = normalize(
        items, input_modalities=frozenset({"text"}), truncation=TruncationPolicy(limit=20)
    )
    assert result.items == (
        user_msg("look", text_part(IMAGE_TEXT)),
        tool_call("a"),
        tool_call("b"),
        tool_call("c"),
        synthesized("c", id_c),
        tool_output("b"),
        tool_output(
            "a",
            f"{ALPHABET}abcdefghijklmnopqrstuv[… 28 tokens omitted …]"
            f"efghijklmnopqrstuvwxyz{ALPHABET}",
        ),
        assistant_msg("hm"),
    )
    assert result.report.as_dict() == report(
        synthesized_outputs=[{"call_id": "c", "id": id_c, "index": 4}],
        removed_orphans=[{"call_id": "ghost", "index": 9}],
        reordered_outputs=[
            {"call_id": "b", "from_index": 2, "to_index": 5},
            {"call_id": "a", "from_index": 7, "to_index": 6},
        ],
        deduplicated_outputs=[{"call_id": "a", "index": 8}],
        stripped_media=[{"index": 0, "kind": "image"}],
        truncated_outputs=[{"call_id": "a", "original_tokens": 52, "kept_tokens": 31}],
        excluded=[
            {"index": 0, "type": "message", "reason": "system_message"},
            {"index": 10, "type": "turn_marker", "reason": "unknown_type"},
        ],
    )
    assert find_pairing_violations(result.items) == []
    again = normalize(
        result.items, input_modalities=frozenset({"text"}), truncation=TruncationPolicy(limit=20)
    )
    assert again.items == result.items
    assert again.report.as_dict() == report()


def test_report_as_dict_always_lists_all_seven_keys() -> None:
    entry = SynthesizedOutput(call_id="a", id="fco_x", index=1)
    assert NormalizeReport().as_dict() == {
        "synthesized_outputs": [],
        "removed_orphans": [],
        "reordered_outputs": [],
        "deduplicated_outputs": [],
        "stripped_media": [],
        "truncated_outputs": [],
        "excluded": [],
    }
    assert NormalizeReport(synthesized_outputs=(entry,)).as_dict() == report(
        synthesized_outputs=[{"call_id": "a", "id": "fco_x", "index": 1}]
    )
    assert [
        NormalizeReport().is_empty(),
        NormalizeReport(synthesized_outputs=(entry,)).is_empty(),
    ] == [
        True,
        False,
    ]


def test_find_pairing_violations_describes_each_broken_pair() -> None:
    items = [
        tool_output("early"),
        tool_call("early"),
        tool_call("a"),
        user_msg("interrupting"),
        tool_output("a"),
        tool_output("a"),
        {"type": "function_call", "name": "sh", "arguments": "{}"},
        tool_call("a"),
        custom_call("lonely"),
        tool_output("lonely"),
    ]
    assert find_pairing_violations(items) == [
        "item 0: function_call_output for call_id 'early' answers no earlier call",
        "item 3: message separates calls 'early', 'a' from their outputs",
        "item 5: second function_call_output for call_id 'a'",
        "item 6: function_call without a call_id",
        "item 7: second function_call with call_id 'a'",
        "item 9: function_call_output for call_id 'lonely' answers no earlier call",
        "item 1: call_id 'early' has no function_call_output after it",
        "item 7: call_id 'a' has no function_call_output after it",
        "item 8: call_id 'lonely' has no custom_tool_call_output after it",
    ]


def test_find_pairing_violations_accepts_parallel_batches() -> None:
    items = [
        user_msg("go"),
        tool_call("a"),
        custom_call("b"),
        shell_call("c"),
        custom_output("b"),
        tool_output("c"),
        tool_output("a"),
        assistant_msg("done"),
    ]
    assert find_pairing_violations(items) == []
