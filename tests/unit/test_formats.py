"""Wire-format conversion: each mapping on hand-built histories in both directions, and round
trips of every recorded trajectory through Chat Completions and Anthropic Messages.

Whether the output is what the providers accept is judged by their own SDK types in
`tests/api/test_provider_output.py`; here the mappings themselves are pinned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.formats import (
    EMPTY_OUTPUT_TEXT,
    ORIGIN_KEY,
    RAW_ARGUMENTS,
    RAW_INPUT,
    Block,
    DroppedField,
    Excluded,
    Parsed,
    Placeholder,
    Rendering,
    cap_cache_breakpoints,
    from_responses,
    mark_cache_breakpoint,
    to_responses,
)
from app.domain.items import FORMATS, OUTPUT_TYPES, Format, Item, item_type
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
ANTHROPIC: Item = {"format": "anthropic"}
CHAT: Item = {"format": "chat"}


# --- responses is the identity ---------------------------------------------------------------


def test_responses_format_is_the_identity_for_openai_items() -> None:
    items = [_text("user", "hi"), COMPACTION, {"anything": ["goes"]}, _reasoning("r", id="rs_1")]
    assert to_responses(items, "responses") == Parsed(items, [], [0, 1, 2, 3])
    assert from_responses(items, "responses") == Rendering(items)


def test_responses_output_keeps_reasoning_with_its_provider() -> None:
    anthropic_thinking = {**_reasoning("hmm", encrypted_content="sig"), ORIGIN_KEY: ANTHROPIC}
    failed = {**_output("t1", "boom"), ORIGIN_KEY: {**ANTHROPIC, "fields": {"is_error": True}}}
    codex_reasoning = _reasoning("stateless", encrypted_content="enc")
    items = [anthropic_thinking, codex_reasoning, _call("t1"), failed]
    assert from_responses(items, "responses") == Rendering(
        [codex_reasoning, _call("t1"), _output("t1", "boom")],
        excluded=[Excluded(0, "reasoning", "foreign_reasoning")],
        dropped_fields=[DroppedField(3, "is_error")],
    )


def test_every_format_is_handled() -> None:
    for fmt in FORMATS:
        assert from_responses([], fmt) == Rendering([])
        assert to_responses([], fmt) == Parsed([], [], [])


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
        _output("c4", ""),
        _message("assistant", "All done."),
    ]
    assert from_responses(items, "chat") == Rendering(
        [
            {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "developer", "content": "use tools"},
            {"role": "user", "content": [{"type": "text", "text": "list files"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Listing."}],
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
            {"role": "tool", "tool_call_id": "c4", "content": EMPTY_OUTPUT_TEXT},
            {"role": "assistant", "content": "All done."},
        ],
        excluded=[Excluded(3, "reasoning", "foreign_reasoning")],
        placeholders=[Placeholder(12, "empty_output")],
    )


def test_chat_to_responses_splits_assistant_messages_into_items() -> None:
    messages: list[Item] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "list files"}], "name": "ann"},
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
    assert to_responses(messages, "chat") == Parsed(
        [
            _message("system", "be brief"),
            {**_text("user", "list files"), ORIGIN_KEY: {**CHAT, "message": {"name": "ann"}}},
            {**_reasoning("need ls"), ORIGIN_KEY: CHAT},
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
        [0, 1, 2, 2, 2, 2, 3, 4, 5, 6, 7, 8],
    )


def test_chat_gives_back_the_fields_it_read() -> None:
    messages: list[Item] = [
        {"role": "user", "content": "hi", "name": "ann"},
        {"role": "assistant", "content": "hello", "name": "bot"},
    ]
    parsed = to_responses(messages, "chat")
    assert from_responses(parsed.items, "chat") == Rendering(messages)
    # Anthropic has no place for a speaker's name: reported, not silently lost.
    assert from_responses(parsed.items, "anthropic").dropped_fields == [
        DroppedField(0, "message.name"),
        DroppedField(1, "message.name"),
    ]


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
    assert from_responses(items, "chat") == Rendering(chat)
    assert to_responses(chat, "chat") == Parsed(items, [], [0])


def test_chat_takes_no_reasoning() -> None:
    items = [
        _reasoning("a"),
        {**_reasoning("b"), ORIGIN_KEY: CHAT},
        _text("assistant", "c"),
        _reasoning("d", id="rs_1", encrypted_content="enc"),
        _call("1"),
        _text("assistant", "e"),
    ]
    chat = from_responses(items, "chat")
    assert chat == Rendering(
        [
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "c"}],
                "tool_calls": [_chat_call("1")],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "e"}]},
        ],
        excluded=[Excluded(i, "reasoning", "foreign_reasoning") for i in (0, 1, 3)],
    )
    assert "reasoning_content" not in str(chat.items)


def test_chat_sends_tool_output_images_in_a_user_message_after_the_tool_messages() -> None:
    png = "data:image/png;base64,iVBO"
    items = [
        _call("c1"),
        _call("c2"),
        _output(
            "c1",
            [{"type": "input_text", "text": "shot:"}, {"type": "input_image", "image_url": png}],
        ),
        _output("c2", [{"type": "input_image", "image_url": "https://x/y.png", "detail": "low"}]),
        _text("assistant", "Seen."),
    ]
    assert from_responses(items, "chat") == Rendering(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [_chat_call("c1"), _chat_call("c2")],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [
                    {"type": "text", "text": "shot:"},
                    {"type": "text", "text": "[image 1: in the user message that follows]"},
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": [
                    {"type": "text", "text": "[image 2: in the user message that follows]"}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Images returned by the tool calls above:"},
                    {"type": "image_url", "image_url": {"url": png}},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Seen."}]},
        ],
        placeholders=[Placeholder(2, "tool_output_image"), Placeholder(3, "tool_output_image")],
    )


def test_chat_leaves_out_what_it_cannot_express() -> None:
    opaque_reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}
    unknown = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    file_part = {"type": "input_file", "file_id": "f1"}
    items = [
        _call("c1"),
        _output("c1", "ok"),
        COMPACTION,
        opaque_reasoning,
        unknown,
        {"no": "type"},
        _message("user", [{"type": "input_text", "text": "see"}, file_part]),
    ]
    assert from_responses(items, "chat") == Rendering(
        [
            {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "text", "text": "[input_file part omitted: not supported here]"},
                ],
            },
        ],
        excluded=[
            Excluded(2, "compaction", "not_expressible"),
            Excluded(3, "reasoning", "foreign_reasoning"),
            Excluded(4, "web_search_call", "not_expressible"),
            Excluded(5, "unknown", "not_expressible"),
        ],
        placeholders=[Placeholder(6, "unsupported_part")],
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
    assert to_responses(messages, "chat") == Parsed(
        [*messages[:6], _message("user", "fine"), COMPACTION],
        [0, 1, 2, 3, 4, 5, 7],
        list(range(8)),
    )


# --- Anthropic Messages ----------------------------------------------------------------------


def test_anthropic_from_responses_merges_items_of_one_role() -> None:
    items = [
        _text("system", "be brief"),
        _message("developer", "use tools"),
        _message("user", "list files"),
        {**_reasoning("need ls", encrypted_content="sig"), ORIGIN_KEY: ANTHROPIC},
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
        {
            "type": "reasoning",
            "summary": [],
            "encrypted_content": "redacted",
            ORIGIN_KEY: ANTHROPIC,
        },
        _text("developer", "state changed"),
    ]
    assert from_responses(items, "anthropic") == Rendering(
        [
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
            # A later instruction is read where Anthropic reads it: in a user turn.
            {"role": "user", "content": [{"type": "text", "text": "state changed"}]},
        ],
        system=[{"type": "text", "text": "be brief"}, {"type": "text", "text": "use tools"}],
        locations=[
            Block(None, 0),
            Block(None, 1),
            Block(0, None),
            *(Block(1, b) for b in range(4)),
            *(Block(2, b) for b in range(3)),
            Block(3, 0),
            Block(3, 1),
            Block(4, 0),
        ],
    )


def test_anthropic_history_opens_with_a_user_turn() -> None:
    items = [_text("developer", "rules"), _text("assistant", "Resuming."), _text("user", "go")]
    assert from_responses(items, "anthropic") == Rendering(
        [
            {"role": "user", "content": "(The conversation so far follows.)"},
            {"role": "assistant", "content": [{"type": "text", "text": "Resuming."}]},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
        ],
        system=[{"type": "text", "text": "rules"}],
        placeholders=[Placeholder(0, "leading_user_turn")],
        locations=[Block(None, 0), Block(1, 0), Block(2, 0)],
    )


def test_anthropic_to_responses_gives_each_block_its_item() -> None:
    cache = {"type": "ephemeral"}
    messages: list[Item] = [
        {"role": "user", "content": "look"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "this", "cache_control": cache},
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
                {"type": "tool_use", "id": "t4", "name": "patch", "input": {RAW_INPUT: "diff"}},
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
                {"type": "tool_result", "tool_use_id": "t4", "content": "patched"},
            ],
        },
        {"role": "assistant", "content": []},
    ]
    image = {"type": "input_image", "image_url": "https://x/z.png", "detail": "auto"}
    assert to_responses(messages, "anthropic") == Parsed(
        [
            _message("user", "look"),
            {
                **_message(
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
                ORIGIN_KEY: {**ANTHROPIC, "parts": [{"cache_control": cache}, {}, {}]},
            },
            {**_reasoning("hmm", encrypted_content="sig"), ORIGIN_KEY: ANTHROPIC},
            {
                "type": "reasoning",
                "summary": [],
                "encrypted_content": "opaque",
                ORIGIN_KEY: ANTHROPIC,
            },
            _message(
                "assistant",
                [
                    {"type": "output_text", "text": "Reading."},
                    {"type": "output_text", "text": "Twice."},
                ],
            ),
            _call("t1", "read", '{"path":"é"}'),
            _call("t2", "raw", "{x"),
            {"type": "custom_tool_call", "call_id": "t4", "name": "patch", "input": "diff"},
            _message("assistant", [{"type": "output_text", "text": "After."}]),
            {**_output("t1", "text"), ORIGIN_KEY: {**ANTHROPIC, "fields": {"is_error": True}}},
            _output("t2", [{"type": "input_text", "text": "see"}, image]),
            _output("t3", ""),
            {"type": "custom_tool_call_output", "call_id": "t4", "output": "patched"},
            _message("assistant", []),
        ],
        [],
        [0, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4],
    )


def test_anthropic_round_trip_gives_back_every_field_it_read() -> None:
    cache = {"type": "ephemeral"}
    messages: list[Item] = [
        {"role": "user", "content": [{"type": "text", "text": "run both", "cache_control": cache}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two calls", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": "ls"}},
                {"type": "tool_use", "id": "t2", "name": "sh", "input": {"cmd": "false"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "exit 1", "cache_control": cache}],
                    "is_error": True,
                },
            ],
        },
    ]
    items = to_responses(messages, "anthropic").items
    assert from_responses(items, "anthropic").items == messages
    # Into another provider: the thinking stays behind, the fields are reported.
    chat = from_responses(items, "chat")
    assert chat.excluded == [Excluded(1, "reasoning", "foreign_reasoning")]
    assert chat.dropped_fields == [
        DroppedField(0, "content[0].cache_control"),
        DroppedField(5, "is_error"),
        DroppedField(5, "content[0].cache_control"),
    ]


def test_anthropic_keeps_at_most_four_cache_breakpoints() -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": [marked]} for n in range(6)
    ]
    rendered = from_responses(to_responses(messages, "anthropic").items, "anthropic")
    kept = [m["content"][0].get("cache_control") is not None for m in rendered.items]
    assert kept == [False, False, True, True, True, True]
    assert rendered.dropped_fields == [DroppedField(0, "cache_control")] * 2


def test_cache_breakpoints_land_on_the_last_cacheable_block() -> None:
    items = [
        _text("developer", "rules"),
        _message("user", "go"),
        {**_reasoning("hmm", encrypted_content="sig"), ORIGIN_KEY: ANTHROPIC},
    ]
    rendered = from_responses(items, "anthropic")
    first, block = mark_cache_breakpoint(rendered, 0)
    assert block == Block(None, 0)
    # Thinking blocks take no cache_control: the breakpoint moves back to the user turn, whose
    # string content becomes a block so that it can carry one.
    both, block = mark_cache_breakpoint(first, 2)
    assert block == Block(0, 0)
    ephemeral = {"cache_control": {"type": "ephemeral"}}
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    assert both == Rendering(
        [
            {"role": "user", "content": [{"type": "text", "text": "go", **ephemeral}]},
            {"role": "assistant", "content": [thinking]},
        ],
        [{"type": "text", "text": "rules", **ephemeral}],
        locations=[Block(None, 0), Block(0, None), Block(1, 0)],
    )
    # Marking returns a new rendering: the one marked is as it was.
    assert rendered == from_responses(items, "anthropic")


def test_capping_breakpoints_keeps_the_services_own_and_the_latest() -> None:
    text = {"type": "text", "text": "x"}
    ephemeral = {"cache_control": {"type": "ephemeral"}}
    roles = ["user", "assistant", "user", "assistant", "user"]
    rendering = Rendering(
        [{"role": role, "content": [{**text, **ephemeral}]} for role in roles],
        [{"type": "text", "text": "rules"}],
        locations=[Block(None, 0), *(Block(m, 0) for m in range(5))],
    )
    mine, block = mark_cache_breakpoint(rendering, 0)
    assert block == Block(None, 0)
    capped = cap_cache_breakpoints(mine, keep={(None, 0)})
    # Six breakpoints, two over the limit: the client's earliest two go, the service's stays.
    assert capped == Rendering(
        [
            {"role": role, "content": [text if m < 2 else {**text, **ephemeral}]}
            for m, role in enumerate(roles)
        ],
        [{"type": "text", "text": "rules", **ephemeral}],
        dropped_fields=[DroppedField(0, "cache_control")] * 2,
        locations=rendering.locations,
    )
    assert mine.dropped_fields == []


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
    items = [_message("user", "go"), _call("c1", "f", arguments)]
    anthropic = from_responses(items, "anthropic")
    assert anthropic.items[1]["content"][0]["input"] == {RAW_ARGUMENTS: arguments}
    assert to_responses(anthropic.items, "anthropic") == Parsed(items, [], [0, 1])


def test_anthropic_carries_custom_tools_and_leaves_out_what_it_cannot_express() -> None:
    custom = {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "diff"}
    custom_output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}
    refusal = _message("assistant", [{"type": "refusal", "refusal": "no"}])
    openai_reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}
    items = [
        _text("developer", "rules"),
        _text("user", "a"),
        custom,
        custom_output,
        _text("user", "b"),
        refusal,
        COMPACTION,
        openai_reasoning,
        _text("user", ""),
    ]
    rendered = from_responses(items, "anthropic")
    assert rendered == Rendering(
        [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "patch", "input": {RAW_INPUT: "diff"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                    {"type": "text", "text": "b"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "no"}]},
        ],
        system=[{"type": "text", "text": "rules"}],
        excluded=[
            Excluded(6, "compaction", "not_expressible"),
            Excluded(7, "reasoning", "foreign_reasoning"),
            Excluded(8, "message", "not_expressible"),
        ],
        locations=[
            Block(None, 0),
            Block(0, 0),
            Block(1, 0),
            Block(2, 0),
            Block(2, 1),
            Block(3, 0),
            None,
            None,
            None,
        ],
    )
    assert to_responses(rendered.items, "anthropic").items[1:4] == [
        custom,
        custom_output,
        _text("user", "b"),
    ]


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
    assert to_responses(messages, "anthropic") == Parsed(
        [*messages[:6], _message("user", "fine")], [0, 1, 2, 3, 4, 5], list(range(7))
    )


# --- round trips of recorded trajectories ----------------------------------------------------


def _as_sent(items: list[Item], fmt: Format) -> list[Item]:
    """What a trajectory becomes in `fmt`, in Responses terms: Chat sends an empty tool output
    as a placeholder; Anthropic sends the leading instructions as `system` and later ones as
    user turns."""
    sent: list[Item] = []
    leading = True
    for item in items:
        instruction = item.get("role") in ("system", "developer")
        leading = leading and instruction
        if fmt == "chat" and item_type(item) in OUTPUT_TYPES and item["output"] in ("", []):
            sent.append({**item, "output": EMPTY_OUTPUT_TEXT})
        elif fmt == "anthropic" and instruction:
            if not leading:
                sent.append({**item, "role": "user"})
        else:
            sent.append(item)
    return sent


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_trajectory_round_trip_preserves_essentials(path: Path, fmt: Format) -> None:
    items = load_trajectory(path)
    wire = from_responses(items, fmt)
    back = to_responses(wire.items, fmt)
    assert essentials(back.items, fmt) == essentials(_as_sent(items, fmt), fmt)
    assert (wire.excluded, back.untranslated) == ([], [])
    leading = [it for it in items[: len(wire.system or [])] if it.get("role") == "system"]
    assert len(leading) == len(wire.system or [])


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda path: path.stem)
def test_trajectory_round_trip_through_chat_is_exact(path: Path) -> None:
    # The recorded items carry no ids, so Chat loses nothing but the emptiness of empty outputs.
    items = load_trajectory(path)
    back = to_responses(from_responses(items, "chat").items, "chat")
    assert back == Parsed(_as_sent(items, "chat"), [], back.sources)


def test_trajectories_are_present() -> None:
    assert len(TRAJECTORIES) >= 20


@pytest.mark.parametrize("fmt", WIRE_FORMATS)
def test_an_output_of_no_known_shape_still_answers_its_call(fmt: Format) -> None:
    items = [_message("user", "go"), _call("c1"), _output("c1", {"exit": 0})]
    rendered = from_responses(items, fmt)
    assert rendered.placeholders == [Placeholder(2, "unsupported_part")]
    assert rendered.excluded == []
    back = to_responses(rendered.items, fmt).items
    assert [item_type(item) for item in back] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert back[2]["output"] == "[content part omitted: not supported here]"
