"""Wire-format conversion: each mapping on hand-built histories in both directions, and round
trips of every recorded trajectory through Chat Completions and Anthropic Messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.formats import RAW_ARGUMENTS, Conversion, from_responses, to_responses
from app.domain.items import FORMATS, Format, Item, item_type
from tests.conftest import TRAJECTORIES, load_trajectory

WIRE_FORMATS: tuple[Format, ...] = ("chat", "anthropic")


def _parts(content: Any) -> Any:
    """Content as (kind, value) pairs: a string is one text part, and empty text carries nothing."""
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        return content
    pairs: list[tuple[str, Any]] = []
    for part in content:
        match part:
            case {"type": "input_text" | "output_text", "text": text}:
                if text:
                    pairs.append(("text", text))
            case {"type": "refusal", "refusal": refusal}:
                pairs.append(("refusal", refusal))
            case {"type": "input_image", "image_url": url}:
                pairs.append(("image", url))
            case {"type": "input_audio", "input_audio": audio}:
                pairs.append(("audio", audio))
            case _:
                pairs.append(("other", part))
    return pairs


def _reasoning_text(item: Item) -> str | None:
    for field in ("summary", "content"):
        parts = item.get(field)
        if isinstance(parts, list) and parts:
            return "\n\n".join(part["text"] for part in parts)
    return None


def _json_arguments(arguments: str) -> str:
    """Arguments that are a JSON object, in compact form; any other string as it is."""
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if not isinstance(decoded, dict):
        return arguments
    return json.dumps(decoded, separators=(",", ":"), ensure_ascii=False)


def essentials(items: list[Item], fmt: Format) -> list[Any]:
    """What a round trip through `fmt` must preserve, one entry per Responses item.

    - message: role and parts (text of any part type, refusals, image URLs, audio); string
      content counts as one text part, empty text carries nothing and a message left without
      parts is dropped (Chat omits empty text beside tool calls). For Anthropic consecutive
      messages of one role are one message, as Anthropic merges them.
    - function_call: call_id, name and arguments, exact for Chat and equal as JSON for
      Anthropic; a local_shell_call is the "local_shell" function with its action as arguments.
    - custom_tool_call: call_id, name, input.
    - outputs: call_id and output (function and custom outputs alike: a Chat tool message
      whose call is not in the history cannot say which it answers).
    - reasoning: its text; its encrypted content too when it has no text.
    - anything else: the item itself, as it is passed through unchanged.
    Item ids, statuses and image detail are not preserved.
    """
    entries: list[Any] = []
    for item in items:
        match item_type(item):
            case "message":
                parts = _parts(item["content"])
                if not parts:
                    continue
                previous = entries[-1] if entries else None
                if (
                    fmt == "anthropic"
                    and isinstance(previous, tuple)
                    and previous[:2] == ("message", item["role"])
                ):
                    entries[-1] = ("message", item["role"], previous[2] + parts)
                else:
                    entries.append(("message", item["role"], parts))
            case "function_call":
                arguments = item["arguments"]
                if fmt == "anthropic":
                    arguments = _json_arguments(arguments)
                entries.append(("call", item["call_id"], item["name"], arguments))
            case "local_shell_call":
                action = json.dumps(item["action"], separators=(",", ":"), ensure_ascii=False)
                entries.append(("call", item["call_id"], "local_shell", action))
            case "custom_tool_call":
                entries.append(("custom_call", item["call_id"], item["name"], item["input"]))
            case "function_call_output" | "custom_tool_call_output":
                output = item["output"]
                entries.append(
                    (
                        "output",
                        item["call_id"],
                        _parts(output) if isinstance(output, list) else output,
                    )
                )
            case "reasoning":
                text = _reasoning_text(item)
                opaque = item.get("encrypted_content") if text is None else None
                entries.append(("reasoning", text, opaque))
            case _:
                entries.append(item)
    return entries


def _message(role: str, content: Any) -> Item:
    return {"type": "message", "role": role, "content": content}


def _text(role: str, text: str) -> Item:
    kind = "output_text" if role == "assistant" else "input_text"
    return _message(role, [{"type": kind, "text": text}])


def _call(call_id: str, name: str = "shell", arguments: str = '{"cmd": "ls"}') -> Item:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _output(call_id: str, output: Any) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _reasoning(text: str, **extra: Any) -> Item:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}], **extra}


def _chat_call(call_id: str, name: str = "shell", arguments: str = '{"cmd": "ls"}') -> Item:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


COMPACTION: Item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}


# --- responses is the identity ---------------------------------------------------------------


@pytest.mark.parametrize("convert", [to_responses, from_responses])
def test_responses_format_is_the_identity(convert: Any) -> None:
    items = [_text("user", "hi"), COMPACTION, {"anything": ["goes"]}]
    assert convert(items, "responses") == Conversion(items, [])


def test_every_format_is_handled() -> None:
    for fmt in FORMATS:
        assert from_responses([], fmt) == Conversion([], [])
        assert to_responses([], fmt) == Conversion([], [])


# --- Chat Completions ------------------------------------------------------------------------


def test_chat_from_responses_groups_each_assistant_turn() -> None:
    items = [
        _text("system", "be brief"),
        _message("developer", "use tools"),
        _text("user", "list files"),
        _reasoning("need ls", id="rs_1", encrypted_content="enc"),
        _text("assistant", "Listing."),
        {**_call("c1"), "id": "fc_1", "status": "completed"},
        _call("c2", "read", '{"path": "a"}'),
        _output("c1", "a\nb"),
        _output("c2", [{"type": "input_text", "text": "x"}]),
        {"type": "custom_tool_call", "call_id": "c3", "name": "patch", "input": "*** Begin"},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": "done"},
        {
            "type": "local_shell_call",
            "call_id": "c4",
            "action": {"type": "exec", "command": ["ls", "-l"]},
            "status": "completed",
        },
        _output("c4", "total 0"),
        _message("assistant", "All done."),
    ]
    assert from_responses(items, "chat") == Conversion(
        [
            {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "developer", "content": "use tools"},
            {"role": "user", "content": [{"type": "text", "text": "list files"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Listing."}],
                "reasoning_content": "need ls",
                "tool_calls": [_chat_call("c1"), _chat_call("c2", "read", '{"path": "a"}')],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a\nb"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "x"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c3",
                        "type": "custom",
                        "custom": {"name": "patch", "input": "*** Begin"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c3", "content": "done"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _chat_call("c4", "local_shell", '{"type":"exec","command":["ls","-l"]}')
                ],
            },
            {"role": "tool", "tool_call_id": "c4", "content": "total 0"},
            {"role": "assistant", "content": "All done."},
        ],
        [],
    )


def test_chat_to_responses_splits_assistant_messages_into_items() -> None:
    messages: list[Item] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "need ls",
            "tool_calls": [
                _chat_call("c1"),
                {"id": "c2", "type": "custom", "custom": {"name": "patch", "input": "diff"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a\nb"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "ok"}]},
        {"role": "assistant", "content": None, "tool_calls": [_chat_call("c3")]},
        {"role": "assistant", "content": "", "tool_calls": [_chat_call("c4")]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "assistant", "content": ""},
    ]
    assert to_responses(messages, "chat") == Conversion(
        [
            _message("system", "be brief"),
            _text("user", "list files"),
            _reasoning("need ls"),
            _message("assistant", "Listing."),
            _call("c1"),
            {"type": "custom_tool_call", "call_id": "c2", "name": "patch", "input": "diff"},
            _output("c1", "a\nb"),
            {
                "type": "custom_tool_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "ok"}],
            },
            _call("c3"),
            _call("c4"),
            _message("assistant", [{"type": "refusal", "refusal": "no"}]),
            _message("assistant", ""),
        ],
        [],
    )


def test_chat_carries_images_and_audio_of_user_messages() -> None:
    audio = {"data": "UklGRg==", "format": "wav"}
    items = [
        _message(
            "user",
            [
                {"type": "input_text", "text": "what is this?"},
                {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"},
                {"type": "input_audio", "input_audio": audio},
            ],
        )
    ]
    chat = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
                {"type": "input_audio", "input_audio": audio},
            ],
        }
    ]
    assert from_responses(items, "chat") == Conversion(chat, [])
    assert to_responses(chat, "chat") == Conversion(items, [])


def test_chat_reasoning_items_each_open_a_turn() -> None:
    items = [
        _reasoning("a"),
        _reasoning("b"),
        _text("assistant", "c"),
        _reasoning("d"),
        _call("1"),
        _text("assistant", "e"),
    ]
    chat = from_responses(items, "chat")
    assert chat == Conversion(
        [
            {"role": "assistant", "content": None, "reasoning_content": "a"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "c"}],
                "reasoning_content": "b",
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "d",
                "tool_calls": [_chat_call("1")],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "e"}]},
        ],
        [],
    )
    assert to_responses(chat.items, "chat") == Conversion(items, [])


def test_chat_passes_through_what_it_cannot_express() -> None:
    opaque_reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}
    tool_image = _output("c2", [{"type": "input_image", "image_url": "https://x/y.png"}])
    unknown = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    items = [
        _call("c1"),
        COMPACTION,
        _call("c2"),
        opaque_reasoning,
        tool_image,
        unknown,
        {"no": "type"},
    ]
    assert from_responses(items, "chat") == Conversion(
        [
            {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1")]},
            COMPACTION,
            {"role": "assistant", "content": None, "tool_calls": [_chat_call("c2")]},
            opaque_reasoning,
            tool_image,
            unknown,
            {"no": "type"},
        ],
        [1, 3, 4, 5, 6],
    )


def test_chat_messages_it_cannot_read_are_passed_through_whole() -> None:
    messages: list[Item] = [
        {"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": 7},
        {"role": "tool", "content": "no call id"},
        {"role": "user", "content": [{"type": "file", "file": {"file_id": "f1"}}]},
        {"role": "function", "name": "legacy", "content": "x"},
        {"role": "user", "content": "fine"},
        COMPACTION,
    ]
    assert to_responses(messages, "chat") == Conversion(
        [*messages[:6], _message("user", "fine"), COMPACTION], [0, 1, 2, 3, 4, 5, 7]
    )


# --- Anthropic Messages ----------------------------------------------------------------------


def test_anthropic_from_responses_merges_items_of_one_role() -> None:
    items = [
        _text("system", "be brief"),
        _message("user", "list files"),
        _reasoning("need ls", encrypted_content="sig"),
        _text("assistant", "Listing."),
        _call("c1"),
        _call("c2", "read", "not json"),
        _output("c1", "a\nb"),
        _output("c2", [{"type": "input_text", "text": "x"}]),
        _text("user", "thanks"),
        {
            "type": "local_shell_call",
            "call_id": "c3",
            "action": {"type": "exec", "command": ["ls"]},
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "redacted"},
    ]
    assert from_responses(items, "anthropic") == Conversion(
        [
            _text("system", "be brief"),
            {"role": "user", "content": "list files"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "need ls", "signature": "sig"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "c1", "name": "shell", "input": {"cmd": "ls"}},
                    {
                        "type": "tool_use",
                        "id": "c2",
                        "name": "read",
                        "input": {RAW_ARGUMENTS: "not json"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "a\nb"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": [{"type": "text", "text": "x"}],
                    },
                    {"type": "text", "text": "thanks"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "c3",
                        "name": "local_shell",
                        "input": {"type": "exec", "command": ["ls"]},
                    },
                    {"type": "redacted_thinking", "data": "redacted"},
                ],
            },
        ],
        [0],
    )


def test_anthropic_to_responses_gives_each_block_its_item() -> None:
    messages: list[Item] = [
        {"role": "user", "content": "look"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "this", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                },
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Reading."},
                {"type": "text", "text": "Twice."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "é"}},
                {"type": "tool_use", "id": "t2", "name": "raw", "input": {RAW_ARGUMENTS: "{x"}},
                {"type": "text", "text": "After."},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "text", "is_error": True},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image", "source": {"type": "url", "url": "https://x/z.png"}},
                    ],
                },
                {"type": "tool_result", "tool_use_id": "t3"},
            ],
        },
        {"role": "assistant", "content": []},
    ]
    image = {"type": "input_image", "image_url": "https://x/z.png", "detail": "auto"}
    assert to_responses(messages, "anthropic") == Conversion(
        [
            _message("user", "look"),
            _message(
                "user",
                [
                    {"type": "input_text", "text": "this"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,iVBO",
                        "detail": "auto",
                    },
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
                ],
            ),
            _reasoning("hmm", encrypted_content="sig"),
            {"type": "reasoning", "summary": [], "encrypted_content": "opaque"},
            _message(
                "assistant",
                [
                    {"type": "output_text", "text": "Reading."},
                    {"type": "output_text", "text": "Twice."},
                ],
            ),
            _call("t1", "read", '{"path":"é"}'),
            _call("t2", "raw", "{x"),
            _message("assistant", [{"type": "output_text", "text": "After."}]),
            _output("t1", "text"),
            _output("t2", [{"type": "input_text", "text": "see"}, image]),
            _output("t3", ""),
            _message("assistant", []),
        ],
        [],
    )


@pytest.mark.parametrize(
    "arguments",
    [
        "",
        "not json",
        "[1, 2]",
        "42",
        '"a string"',
        '{"a": NaN}',
        '{"a": 1e400}',
        f'{{"{RAW_ARGUMENTS}": "looks like the carrier"}}',
        '{"a": 1',
    ],
)
def test_anthropic_carries_arguments_that_are_not_an_object_exactly(arguments: str) -> None:
    items = [_call("c1", "f", arguments)]
    anthropic = from_responses(items, "anthropic")
    assert anthropic.items[0]["content"][0]["input"] == {RAW_ARGUMENTS: arguments}
    assert to_responses(anthropic.items, "anthropic") == Conversion(items, [])


def test_anthropic_passes_through_what_it_cannot_express() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "diff"}
    custom_output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}
    refusal = _message("assistant", [{"type": "refusal", "refusal": "no"}])
    items = [
        _text("developer", "rules"),
        _text("user", "a"),
        custom,
        custom_output,
        _text("user", "b"),
        refusal,
        COMPACTION,
        {"type": "reasoning", "summary": []},
    ]
    assert from_responses(items, "anthropic") == Conversion(
        [
            items[0],
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            custom,
            custom_output,
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
            refusal,
            COMPACTION,
            items[7],
        ],
        [0, 2, 3, 5, 6, 7],
    )


def test_anthropic_messages_it_cannot_read_are_passed_through_whole() -> None:
    messages: list[Item] = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "document"}]},
        {
            "role": "assistant",
            "content": [{"type": "image", "source": {"type": "url", "url": "u"}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "n", "input": 1}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 3}]},
        {"role": "user"},
        {"role": "user", "content": "fine"},
    ]
    assert to_responses(messages, "anthropic") == Conversion(
        [*messages[:6], _message("user", "fine")], [0, 1, 2, 3, 4, 5]
    )


# --- round trips of recorded trajectories ----------------------------------------------------


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_trajectory_round_trip_preserves_essentials(path: Path, fmt: Format) -> None:
    items = load_trajectory(path)
    wire = from_responses(items, fmt)
    back = to_responses(wire.items, fmt)
    assert essentials(back.items, fmt) == essentials(items, fmt)
    # Anthropic has no system role: only system messages are left untranslated, both ways.
    held_back = [
        index
        for index, item in enumerate(items)
        if fmt == "anthropic" and item.get("role") in ("system", "developer")
    ]
    assert wire.untranslated == held_back
    assert [wire.items[index] for index in back.untranslated] == [items[i] for i in held_back]


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_trajectory_round_trip_through_chat_is_exact(path: Path) -> None:
    # The recorded items carry no ids, so Chat loses nothing at all.
    items = load_trajectory(path)
    assert to_responses(from_responses(items, "chat").items, "chat") == Conversion(items, [])


def test_trajectories_are_present() -> None:
    assert len(TRAJECTORIES) >= 20
