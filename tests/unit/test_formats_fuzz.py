"""Property tests of wire-format conversion: total on any JSON objects, lossless on well-formed
histories (up to what each format cannot carry, see `essentials`)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.formats import Excluded, Parsed, Rendering, from_responses, to_responses
from app.domain.items import OUTPUT_TYPES, Format, Item, item_type
from tests.unit.test_formats import WIRE_FORMATS, essentials

BOUNDED = settings(max_examples=200, deadline=None)

# Field names and values of all three formats, so random objects often come close to real ones.
KEYS = [
    "type",
    "role",
    "content",
    "call_id",
    "name",
    "arguments",
    "output",
    "summary",
    "encrypted_content",
    "input",
    "action",
    "tool_calls",
    "tool_call_id",
    "id",
    "function",
    "custom",
    "reasoning_content",
    "text",
    "image_url",
    "source",
    "tool_use_id",
    "thinking",
    "signature",
    "data",
    "refusal",
    "input_audio",
    "url",
    "media_type",
    "detail",
    "is_error",
]
WORDS = [
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "reasoning",
    "compaction",
    "summary_text",
    "reasoning_text",
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "input_text",
    "output_text",
    "input_image",
    "input_audio",
    "refusal",
    "text",
    "image_url",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "base64",
    "url",
    "function",
    "custom",
    "_raw_arguments",
]

texts = st.text(max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
    | st.sampled_from(WORDS),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | texts, children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.sampled_from(KEYS) | texts, json_values, max_size=5)
# Objects no format can read: neither a role nor a type says what they are.
plain_objects = st.dictionaries(
    st.sampled_from(KEYS).filter(lambda key: key not in ("type", "role"))
    | texts.map("x-{}".format),
    json_values,
    max_size=4,
)

call_ids = st.text(alphabet="abc123", min_size=1, max_size=3)
image_urls = st.sampled_from(["https://x/a.png", "data:image/png;base64,iVBO", "data:;base64,"])
arguments = st.one_of(
    texts,
    json_values.map(json.dumps),
    st.dictionaries(texts, json_values, max_size=3).map(json.dumps),
    st.dictionaries(texts, json_values, max_size=3).map(
        lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    ),
)


def _text_parts(kind: str) -> st.SearchStrategy[list[Item]]:
    return st.lists(texts.map(lambda text: {"type": kind, "text": text}), max_size=3)


@st.composite
def messages(draw: st.DrawFn) -> Item:
    role = draw(st.sampled_from(["user", "assistant", "system", "developer"]))
    if draw(st.booleans()):
        return {"type": "message", "role": role, "content": draw(texts)}
    kind = "output_text" if role == "assistant" else "input_text"
    part: st.SearchStrategy[Item] = texts.map(lambda text: {"type": kind, "text": text})
    if role == "assistant":
        part |= texts.map(lambda text: {"type": "refusal", "refusal": text})
    if role == "user":
        part |= st.builds(
            lambda url, detail: {"type": "input_image", "image_url": url, "detail": detail},
            image_urls,
            st.sampled_from(["auto", "low", "high"]),
        )
        part |= st.just({"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}})
    return {"type": "message", "role": role, "content": draw(st.lists(part, max_size=3))}


@st.composite
def calls(draw: st.DrawFn) -> Item:
    call_id = draw(call_ids)
    match draw(st.sampled_from(["function", "custom", "local_shell"])):
        case "function":
            call: Item = {"type": "function_call", "call_id": call_id, "name": draw(texts)}
            call["arguments"] = draw(arguments)
            if draw(st.booleans()):
                call["id"] = f"fc_{call_id}"
            return call
        case "custom":
            return {
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": draw(texts),
                "input": draw(texts),
            }
        case _:
            command = draw(st.lists(texts, min_size=1, max_size=3))
            return {
                "type": "local_shell_call",
                "call_id": call_id,
                "action": {"type": "exec", "command": command},
                "status": "completed",
            }


outputs = st.builds(
    lambda kind, call_id, output: {"type": kind, "call_id": call_id, "output": output},
    st.sampled_from(["function_call_output", "custom_tool_call_output"]),
    call_ids,
    texts
    | _text_parts("input_text")
    | st.lists(
        st.builds(lambda url: {"type": "input_image", "image_url": url}, image_urls), max_size=2
    ),
)


@st.composite
def reasonings(draw: st.DrawFn) -> Item:
    item: Item = {"type": "reasoning", "summary": draw(_text_parts("summary_text"))}
    if draw(st.booleans()):
        item["content"] = draw(_text_parts("reasoning_text"))
    if draw(st.booleans()):
        item["encrypted_content"] = draw(texts)
    if draw(st.booleans()):
        item["id"] = "rs_1"
    return item


histories = st.lists(
    st.one_of(
        messages(),
        calls(),
        outputs,
        reasonings(),
        st.just({"type": "compaction", "encrypted_content": "opaque"}),
        plain_objects,
    ),
    max_size=12,
)


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one nested value replaced by random JSON or removed: a near miss."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        changed = dict(value)
        if draw(st.booleans()):
            del changed[key]
        else:
            changed[key] = draw(mutated(value[key]))
        return changed
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(mutated(value[index])), *value[index + 1 :]]
    return draw(json_values)


@st.composite
def near_misses(draw: st.DrawFn) -> list[Item]:
    """Well-formed items in any format, some of them slightly broken, among random objects."""
    history = draw(histories)
    fmt = draw(st.sampled_from(WIRE_FORMATS))
    pool = history + from_responses(history, fmt).items + draw(st.lists(json_objects, max_size=3))
    chosen = draw(st.lists(st.sampled_from(pool), max_size=10)) if pool else []
    broken = [draw(mutated(item)) if draw(st.booleans()) else item for item in chosen]
    return [item for item in broken if isinstance(item, dict)]


def _check_passed_through(items: list[Item], result: Parsed) -> None:
    assert result.untranslated == sorted(set(result.untranslated))
    assert all(0 <= index < len(items) for index in result.untranslated)
    # Unreadable inputs appear in the output unchanged and in their order.
    remaining = iter(result.items)
    assert all(any(out is items[i] for out in remaining) for i in result.untranslated)
    assert len(result.sources) == len(result.items)


def _check_rendering(items: list[Item], result: Rendering) -> None:
    indices = [entry.index for entry in result.excluded]
    assert indices == sorted(set(indices))
    assert all(0 <= index < len(items) for index in indices)
    # Nothing is passed through: every output object is a new one.
    assert not any(out is item for out in result.items for item in items)


@BOUNDED
@given(items=st.lists(json_objects, max_size=8) | near_misses(), fmt=st.sampled_from(WIRE_FORMATS))
def test_converters_accept_any_json_objects(items: list[Item], fmt: Format) -> None:
    before = copy.deepcopy(items)
    parsed = to_responses(items, fmt)
    assert items == before
    _check_passed_through(items, parsed)
    rendered = from_responses(items, fmt)
    assert items == before
    _check_rendering(items, rendered)
    # Whatever came out converts again without error.
    to_responses(from_responses(parsed.items, fmt).items, fmt)
    to_responses(rendered.items, fmt)


@BOUNDED
@given(items=st.lists(plain_objects, max_size=8), fmt=st.sampled_from(WIRE_FORMATS))
def test_objects_no_format_reads_are_kept_on_reading_and_left_out_on_writing(
    items: list[Item], fmt: Format
) -> None:
    everything = list(range(len(items)))
    assert to_responses(items, fmt) == Parsed(items, everything, everything)
    rendered = from_responses(items, fmt)
    assert rendered.items == []
    assert rendered.excluded == [Excluded(i, "unknown", "not_expressible") for i in everything]


def _empty(content: object) -> bool:
    if isinstance(content, str):
        return content == ""
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("text") == "" for part in content
    )


def carried(items: list[Item], fmt: Format) -> list[Item]:
    """The items of a history that `fmt` carries whole (no placeholder, no exclusion, no move):
    no reasoning (it stays with its provider) and nothing but messages, calls and outputs; for
    Chat, outputs of text only and not empty; for Anthropic, a history opening with a user turn,
    no instructions (they go to `system`), user and assistant parts it has blocks for, and
    outputs that are not empty and open their user message."""
    kept: list[Item] = [{"type": "message", "role": "user", "content": "start"}]
    for item in items:
        kind = item_type(item)
        if kind == "reasoning" or kind not in {
            "message",
            "function_call",
            "custom_tool_call",
            "local_shell_call",
            *OUTPUT_TYPES,
        }:
            continue
        if kind in OUTPUT_TYPES:
            output = item["output"]
            if _empty(output):
                continue
            if (
                fmt == "chat"
                and isinstance(output, list)
                and any(part.get("type") != "input_text" for part in output)
            ):
                continue
            previous = kept[-1]
            if (
                fmt == "anthropic"
                and item_type(previous) == "message"
                and previous["role"] != "assistant"
            ):
                continue
        if kind == "message" and fmt == "anthropic":
            parts = item["content"]
            if item["role"] in ("system", "developer") or _empty(parts):
                continue
            allowed = {"input_text", "input_image"} if item["role"] == "user" else {"output_text"}
            if isinstance(parts, list) and any(part.get("type") not in allowed for part in parts):
                continue
        kept.append(item)
    return kept


@BOUNDED
@given(history=histories, fmt=st.sampled_from(WIRE_FORMATS))
def test_round_trip_preserves_essentials(history: list[Item], fmt: Format) -> None:
    items = carried(history, fmt)
    wire = from_responses(items, fmt)
    _check_rendering(items, wire)
    assert wire.report() == {"excluded": [], "dropped_fields": [], "placeholders": []}
    back = to_responses(wire.items, fmt)
    assert back.untranslated == []
    assert essentials(back.items, fmt) == essentials(items, fmt)
