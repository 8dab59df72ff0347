"""Item vocabulary shared by the core.

Items are JSON objects in the OpenAI Responses input-item shape (the canonical form); the
other wire formats are converted to and from it in `formats`. Items are never mutated in
place by the core: every transformation returns new objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

Item = dict[str, Any]
"""One Responses input item, a JSON object as received."""

Format = Literal["responses", "chat", "anthropic"]
FORMATS: tuple[Format, ...] = ("responses", "chat", "anthropic")

INTERNAL_TYPE_PREFIX = "contextd."
"""The prefix of the facts the service itself writes (see `facts`). They live in the log but
are never model-visible as such, and clients cannot append them."""

MAX_TYPE_LENGTH = 64
"""An item's type is a column of the log: at most this long, and without a NUL character."""

CountTokens = Callable[[str], int]
"""Exact token count of a text under the caller's encoding."""

CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
KNOWN_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "compaction",
        "web_search_call",
        "image_generation_call",
        "configuration_update",
    }
)


def developer_message(text: str) -> Item:
    """A developer-role message carrying `text`: how the service hands the model its own text."""
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def item_type(item: Item) -> str:
    """The item's `type`; a message given without one (as Responses allows) is a `message`."""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return "message" if "role" in item else "unknown"


def logged_key(item: Item) -> tuple[str, object] | None:
    """What a call or an output is found by among the logged items: its type and call_id (an
    item a compaction wrote in its place, such as a cleared output, carries both). None for
    any other item. Pairing an output with its call is normalization's (`call_key`,
    `answer_key` in `app.domain.normalize`), by family rather than type."""
    kind = item_type(item)
    if kind in CALL_TYPES or kind in OUTPUT_TYPES:
        return kind, item.get("call_id")
    return None


MODEL_OUTPUT_TYPES = CALL_TYPES | {"reasoning"}
"""Item types only a model writes (with assistant messages)."""


def is_model_output(item: Item) -> bool:
    """Whether a model wrote `item`: a call, a reasoning item or an assistant message. A run of
    them is what one model call produced."""
    kind = item_type(item)
    return kind in MODEL_OUTPUT_TYPES or (kind == "message" and item.get("role") == "assistant")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            text = part.get("text")
            if isinstance(text, str):
                parts.append(text)
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


def visible_text(item: Item) -> str:
    """The model-visible text of an item: what its token count is charged on.

    Transport fields (ids, status) are not charged; names, arguments, inputs, outputs,
    message text and reasoning summaries are.
    """
    match item_type(item):
        case "message":
            return _content_text(item.get("content"))
        case "function_call":
            return f"{item.get('name', '')}\n{item.get('arguments', '')}"
        case "custom_tool_call":
            return f"{item.get('name', '')}\n{item.get('input', '')}"
        case "local_shell_call":
            action = item.get("action")
            command = action.get("command") if isinstance(action, dict) else None
            return " ".join(command) if isinstance(command, list) else str(command or "")
        case "function_call_output" | "custom_tool_call_output":
            return _content_text(item.get("output"))
        case "reasoning":
            return "\n".join(
                [_content_text(item.get("summary")), _content_text(item.get("content"))]
            ).strip("\n")
        case _:
            return ""


def item_tokens(item: Item, count: CountTokens) -> int:
    """The tokens an item is charged: `count` of its visible text (`visible_text`)."""
    return count(visible_text(item))


Refusal = Literal[
    "not_an_object", "unknown_type", "system_message", "not_harness_authored", "malformed"
]


_JSON_NAMES = {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number"}


def _json_name(value: object) -> str:
    """What a JSON value is, in words (`null`, `a number`, ...)."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return "a number"
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _content_fault(value: object) -> str | None:
    """What keeps `value` from being text or a list of content parts (objects), what a message
    or an output may carry; None when it is one."""
    if isinstance(value, str):
        return None
    if isinstance(value, list):
        for n, part in enumerate(value):
            if not isinstance(part, dict):
                return f"part {n} is {_json_name(part)}, not an object"
        return None
    return f"is {_json_name(value)}, not text or a list of parts"


def _text_fault(item: Item, field: str) -> str | None:
    value = item.get(field)
    if isinstance(value, str):
        return None
    return f"without {field}" if value is None else f"{field} is {_json_name(value)}, not text"


def malformation(item: Item, kind: str) -> str | None:
    """What is wrong, in words, with the fields a provider reads of a known item (`message
    without role`, `function_call arguments is an object, not text`); None when they have the
    shape every format needs: a message's content and an output's output text or parts, a
    call's name and arguments (or input) text. Other fields pass as they are."""
    match kind:
        case "message":
            if (fault := _text_fault(item, "role")) is not None:
                return f"message {fault}"
            if "content" not in item:
                return "message without content"
            fault = _content_fault(item["content"])
            return None if fault is None else f"message content {fault}"
        case "function_call_output" | "custom_tool_call_output":
            if "output" not in item:
                return f"{kind} without output"
            fault = _content_fault(item["output"])
            return None if fault is None else f"{kind} output {fault}"
        case "function_call" | "custom_tool_call":
            argument = "arguments" if kind == "function_call" else "input"
            for field in ("name", argument):
                if (fault := _text_fault(item, field)) is not None:
                    return f"{kind} {fault}"
            return None
        case _:
            return None


def admission_reason(item: object, *, harness_authored: bool) -> Refusal | None:
    """Why `item` is kept out of model-visible history, or None when it is admitted.

    System messages travel as instructions, not history; configuration updates are admitted
    only when the harness wrote them; unknown types, and known ones whose fields have the wrong
    shape (`malformation` says how), stay in the log but are never shown.
    """
    if not isinstance(item, dict):
        return "not_an_object"
    kind = item_type(item)
    if kind == "message" and item.get("role") == "system":
        return "system_message"
    if kind == "configuration_update" and not harness_authored:
        return "not_harness_authored"
    if kind not in KNOWN_TYPES:
        return "unknown_type"
    if malformation(item, kind) is not None:
        return "malformed"
    return None
