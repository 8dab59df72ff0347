"""Conversion between canonical Responses items and the Chat Completions and Anthropic wire formats.

Invariants:
- Pure and total: for any list of JSON objects every function returns; malformed or
  inexpressible input is reported, never raised on.
- Nothing is dropped silently. An input element the target format cannot express is copied
  unchanged into the output at its position and its input index listed in
  `Conversion.untranslated`. An element is translated whole or not at all.
- Inputs are never mutated. Outputs are new lists of new top-level objects, which may share
  nested values (an `action`, an `input_audio`) with the input; nobody mutates either.
- `to_responses(from_responses(items, fmt).items, fmt)` gives back every message's role and
  parts, every call's call_id, name and arguments, every output's call_id and output, and
  every reasoning text. What each format cannot carry is listed below.

Chat Completions ("chat"):
- A Responses assistant turn (reasoning, then an assistant message, then calls) becomes one
  assistant message: reasoning text in `reasoning_content` (DeepSeek style), calls in
  `tool_calls`. Each reasoning item opens a new turn, so reasoning items never merge.
- `local_shell_call` becomes a function tool call named "local_shell" whose arguments are the
  `action` as compact JSON; it comes back as a `function_call` of that name.
- A tool message answers a `custom_tool_call` seen earlier in the same list when its
  `tool_call_id` names one, and a `function_call` otherwise.
- Lost: item ids and statuses, reasoning ids and encrypted content, an empty assistant message
  beside tool calls, image `detail` when absent (it comes back as "auto").
- Untranslated: reasoning without any text, image parts in tool outputs, file parts, and every
  item type other than messages, calls, outputs and reasoning (e.g. `compaction`).

Anthropic Messages ("anthropic"):
- Consecutive items of one role share one message: calls and reasoning are assistant blocks,
  outputs are `tool_result` blocks of a user message. A message stands alone as plain string
  content only when it is the single item of its Anthropic message. Going back, consecutive
  text and image blocks of a message form one Responses message.
- Tool inputs must be objects: `arguments` that do not parse as a JSON object (or that hold
  NaN or infinities, or would read back as the carrier) travel as
  `{"_raw_arguments": "<the string>"}` and come back exactly. Parsed arguments come back as
  compact JSON (`separators=(",", ":")`, no ASCII escaping): equal as JSON to the original,
  not necessarily as text.
- Reasoning becomes a `thinking` block with its text and with `encrypted_content` as the
  signature; reasoning with no text but encrypted content becomes `redacted_thinking`.
  A signature only verifies at the provider that issued it.
- Lost: item ids, `is_error` on tool results, image `detail`, message boundaries between
  consecutive same-role messages.
- Untranslated: system and developer messages (the caller sends them as the top-level
  `system` parameter), custom tool calls and their outputs (Anthropic tools take objects, not
  free text), refusal and audio parts, and every other item type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, assert_never

from app.domain.items import OUTPUT_TYPES, Format, Item, item_type

RAW_ARGUMENTS = "_raw_arguments"
"""Tool-input key carrying function arguments that are not a JSON object (Anthropic)."""

LOCAL_SHELL_TOOL = "local_shell"
"""Tool name a `local_shell_call` takes in formats without a local shell item."""

REASONING_SEPARATOR = "\n\n"
"""Joins the summary parts of one reasoning item into the single text other formats hold."""

_CHAT_MEDIA_ROLES = ("user", "system", "developer")
"""Chat roles whose content may hold images and audio (assistant and tool content may not)."""

PartConverter = Callable[[Any, str], Item | None]
"""Converts one content part for a role; None when that role cannot carry it in the target."""


@dataclass(frozen=True)
class Conversion:
    """A converted history and the input elements the target format could not express."""

    items: list[Item]
    untranslated: list[int]
    """Input indices of elements passed through unchanged because the target cannot express them."""


def to_responses(items: list[Item], fmt: Format) -> Conversion:
    """Convert a history in wire format `fmt` to canonical Responses items."""
    match fmt:
        case "responses":
            return Conversion(list(items), [])
        case "chat":
            return _chat_to_responses(items)
        case "anthropic":
            return _anthropic_to_responses(items)
        case _:
            assert_never(fmt)


def from_responses(items: list[Item], fmt: Format) -> Conversion:
    """Convert canonical Responses items to a history in wire format `fmt`."""
    match fmt:
        case "responses":
            return Conversion(list(items), [])
        case "chat":
            return _chat_from_responses(items)
        case "anthropic":
            return _anthropic_from_responses(items)
        case _:
            assert_never(fmt)


def _convert_content(content: Any, *, part: PartConverter, role: str) -> str | list[Item] | None:
    """Content kept as a string stays a string, so round trips are exact; None if any part fails."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [part(each, role) for each in content]
    if None in parts:
        return None
    return [each for each in parts if each is not None]


def _dump_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _finite_float(token: str) -> float:
    # NaN and infinities are not JSON: an Anthropic tool input holding one would be rejected.
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {token}")
    return value


def _reasoning_text(item: Item) -> str | None:
    """The readable text of a reasoning item: its summary, else its raw content; None if neither."""
    for field in ("summary", "content"):
        parts = item.get(field)
        if isinstance(parts, list) and parts:
            texts = [each.get("text") if isinstance(each, dict) else None for each in parts]
            strings = [text for text in texts if isinstance(text, str)]
            return REASONING_SEPARATOR.join(strings) if len(strings) == len(texts) else None
    return None


# --- Chat Completions ---------------------------------------------------------------------


def _chat_part(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "input_text" | "output_text", "text": str() as text}, _:
            return {"type": "text", "text": text}
        case {"type": "refusal", "refusal": str() as refusal}, "assistant":
            return {"type": "refusal", "refusal": refusal}
        case {"type": "input_image", "image_url": str() as url}, _ if role in _CHAT_MEDIA_ROLES:
            image: Item = {"url": url}
            if part.get("detail") is not None:
                image["detail"] = part["detail"]
            return {"type": "image_url", "image_url": image}
        case {"type": "input_audio", "input_audio": dict() as audio}, _ if (
            role in _CHAT_MEDIA_ROLES
        ):
            return {"type": "input_audio", "input_audio": audio}
        case _:
            return None


def _responses_part_from_chat(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "text", "text": str() as text}, _:
            return {"type": "output_text" if role == "assistant" else "input_text", "text": text}
        case {"type": "refusal", "refusal": str() as refusal}, "assistant":
            return {"type": "refusal", "refusal": refusal}
        case {"type": "image_url", "image_url": {"url": str() as url}}, _ if (
            role in _CHAT_MEDIA_ROLES
        ):
            detail = part["image_url"].get("detail")
            return {"type": "input_image", "image_url": url, "detail": detail or "auto"}
        case {"type": "input_audio", "input_audio": dict() as audio}, _ if (
            role in _CHAT_MEDIA_ROLES
        ):
            return {"type": "input_audio", "input_audio": audio}
        case _:
            return None


def _chat_from_responses(items: list[Item]) -> Conversion:
    out: list[Item] = []
    untranslated: list[int] = []
    # The assistant message being assembled: it is already in `out` and later assistant-side
    # items (its message text, its calls) are folded into it until something else comes.
    turn: Item | None = None
    for index, item in enumerate(items):
        call: Item | None = None
        standalone: Item | None = None
        match item_type(item), item:
            case "reasoning", _:
                text = _reasoning_text(item)
                if text is not None:
                    turn = {"role": "assistant", "content": None, "reasoning_content": text}
                    out.append(turn)
                    continue
            case "message", {"role": "assistant", "content": content}:
                parts = _convert_content(content, part=_chat_part, role="assistant")
                if parts is not None:
                    # Only a turn holding nothing but reasoning can still take the text.
                    if turn is None or turn["content"] is not None or "tool_calls" in turn:
                        turn = {"role": "assistant", "content": None}
                        out.append(turn)
                    turn["content"] = parts
                    continue
            case "function_call", {
                "call_id": str() as call_id,
                "name": str() as name,
                "arguments": str() as arguments,
            }:
                function = {"name": name, "arguments": arguments}
                call = {"id": call_id, "type": "function", "function": function}
            case "custom_tool_call", {
                "call_id": str() as call_id,
                "name": str() as name,
                "input": str() as text,
            }:
                call = {"id": call_id, "type": "custom", "custom": {"name": name, "input": text}}
            case "local_shell_call", {"call_id": str() as call_id, "action": dict() as action}:
                function = {"name": LOCAL_SHELL_TOOL, "arguments": _dump_json(action)}
                call = {"id": call_id, "type": "function", "function": function}
            case "message", {"role": ("user" | "system" | "developer") as role, "content": content}:
                parts = _convert_content(content, part=_chat_part, role=role)
                if parts is not None:
                    standalone = {"role": role, "content": parts}
            case kind, {"call_id": str() as call_id, "output": output} if kind in OUTPUT_TYPES:
                # Chat tool messages carry text only.
                parts = _convert_content(output, part=_chat_part, role="tool")
                if parts is not None:
                    standalone = {"role": "tool", "tool_call_id": call_id, "content": parts}
            case _:
                pass
        if call is not None:
            if turn is None:
                turn = {"role": "assistant", "content": None}
                out.append(turn)
            turn.setdefault("tool_calls", []).append(call)
            continue
        turn = None
        if standalone is not None:
            out.append(standalone)
        else:
            untranslated.append(index)
            out.append(item)
    return Conversion(out, untranslated)


def _chat_to_responses(messages: list[Item]) -> Conversion:
    out: list[Item] = []
    untranslated: list[int] = []
    # Chat tool messages do not say which kind of call they answer; the call they name does.
    custom_calls: set[str] = set()
    for index, message in enumerate(messages):
        converted: list[Item] | None = None
        match message:
            case {"role": "assistant"}:
                content = message.get("content")
                parts = (
                    None
                    if content is None
                    else _convert_content(content, part=_responses_part_from_chat, role="assistant")
                )
                tool_calls = message.get("tool_calls") or []
                valid = isinstance(tool_calls, list) and (content is None or parts is not None)
                calls: list[Item] = []
                for tool_call in tool_calls if valid else []:
                    match tool_call:
                        case {
                            "id": str() as call_id,
                            "type": "function",
                            "function": {"name": str() as name, "arguments": str() as arguments},
                        }:
                            calls.append(
                                {
                                    "type": "function_call",
                                    "call_id": call_id,
                                    "name": name,
                                    "arguments": arguments,
                                }
                            )
                        case {
                            "id": str() as call_id,
                            "type": "custom",
                            "custom": {"name": str() as name, "input": str() as text},
                        }:
                            calls.append(
                                {
                                    "type": "custom_tool_call",
                                    "call_id": call_id,
                                    "name": name,
                                    "input": text,
                                }
                            )
                        case _:
                            valid = False
                if valid:
                    converted = []
                    reasoning = message.get("reasoning_content")
                    if isinstance(reasoning, str):
                        summary = [{"type": "summary_text", "text": reasoning}]
                        converted.append({"type": "reasoning", "summary": summary})
                    # Empty text beside tool calls is how Chat replies say "no text".
                    if parts is not None and (parts or not calls):
                        converted.append({"type": "message", "role": "assistant", "content": parts})
                    converted.extend(calls)
                    custom_calls.update(
                        call["call_id"] for call in calls if call["type"] == "custom_tool_call"
                    )
            case {"role": ("user" | "system" | "developer") as role, "content": content}:
                parts = _convert_content(content, part=_responses_part_from_chat, role=role)
                if parts is not None:
                    converted = [{"type": "message", "role": role, "content": parts}]
            case {"role": "tool", "tool_call_id": str() as call_id, "content": content}:
                parts = _convert_content(content, part=_responses_part_from_chat, role="tool")
                if parts is not None:
                    custom = call_id in custom_calls
                    kind = "custom_tool_call_output" if custom else "function_call_output"
                    converted = [{"type": kind, "call_id": call_id, "output": parts}]
            case _:
                pass
        if converted:
            out.extend(converted)
        else:
            untranslated.append(index)
            out.append(message)
    return Conversion(out, untranslated)


# --- Anthropic Messages -------------------------------------------------------------------


def _anthropic_block(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "input_text" | "output_text", "text": str() as text}, _:
            return {"type": "text", "text": text}
        case {"type": "input_image", "image_url": str() as url}, ("user" | "tool"):
            header, base64_marker, data = url.partition(";base64,")
            if header.startswith("data:") and base64_marker:
                source = {
                    "type": "base64",
                    "media_type": header.removeprefix("data:"),
                    "data": data,
                }
                return {"type": "image", "source": source}
            return {"type": "image", "source": {"type": "url", "url": url}}
        case _:
            return None


def _responses_part_from_anthropic(block: Any, role: str) -> Item | None:
    match block, role:
        case {"type": "text", "text": str() as text}, _:
            return {"type": "output_text" if role == "assistant" else "input_text", "text": text}
        case {
            "type": "image",
            "source": {"type": "base64", "media_type": str() as media_type, "data": str() as data},
        }, ("user" | "tool"):
            url = f"data:{media_type};base64,{data}"
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        case {"type": "image", "source": {"type": "url", "url": str() as url}}, ("user" | "tool"):
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        case _:
            return None


def _anthropic_from_responses(items: list[Item]) -> Conversion:
    out: list[Item] = []
    untranslated: list[int] = []
    # The message being assembled: it is already in `out`, and following items of its role
    # append their blocks to it.
    turn: Item | None = None
    for index, item in enumerate(items):
        role: str | None = None
        blocks: list[Item] = []
        whole: str | None = None
        match item_type(item), item:
            case "message", {"role": ("user" | "assistant") as message_role, "content": content}:
                parts = _convert_content(content, part=_anthropic_block, role=message_role)
                if isinstance(parts, str):
                    role, whole, blocks = message_role, parts, [{"type": "text", "text": parts}]
                elif parts is not None:
                    role, blocks = message_role, parts
            case "function_call", {
                "call_id": str() as call_id,
                "name": str() as name,
                "arguments": str() as arguments,
            }:
                try:
                    tool_input = json.loads(
                        arguments, parse_float=_finite_float, parse_constant=_finite_float
                    )
                except (ValueError, RecursionError):
                    tool_input = None
                # Anthropic only takes an object; anything else, or an object that would read
                # back as the carrier, travels raw so the round trip restores the exact string.
                if not isinstance(tool_input, dict) or list(tool_input) == [RAW_ARGUMENTS]:
                    tool_input = {RAW_ARGUMENTS: arguments}
                role = "assistant"
                blocks = [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}]
            case "local_shell_call", {"call_id": str() as call_id, "action": dict() as action}:
                role = "assistant"
                blocks = [
                    {"type": "tool_use", "id": call_id, "name": LOCAL_SHELL_TOOL, "input": action}
                ]
            case "reasoning", _:
                text = _reasoning_text(item)
                signature = item.get("encrypted_content")
                if text is not None:
                    thinking: Item = {"type": "thinking", "thinking": text}
                    if isinstance(signature, str):
                        thinking["signature"] = signature
                    role, blocks = "assistant", [thinking]
                elif isinstance(signature, str):
                    role, blocks = "assistant", [{"type": "redacted_thinking", "data": signature}]
            case "function_call_output", {"call_id": str() as call_id, "output": output}:
                result = _convert_content(output, part=_anthropic_block, role="tool")
                if result is not None:
                    role = "user"
                    blocks = [{"type": "tool_result", "tool_use_id": call_id, "content": result}]
            case _:
                pass
        if role is None:
            untranslated.append(index)
            out.append(item)
            turn = None
        elif turn is not None and turn["role"] == role:
            if isinstance(turn["content"], str):
                turn["content"] = [{"type": "text", "text": turn["content"]}]
            turn["content"].extend(blocks)
        else:
            # A lone string message keeps its string form so it round-trips exactly.
            turn = {"role": role, "content": blocks if whole is None else whole}
            out.append(turn)
    return Conversion(out, untranslated)


def _anthropic_to_responses(messages: list[Item]) -> Conversion:
    out: list[Item] = []
    untranslated: list[int] = []
    for index, message in enumerate(messages):
        converted: list[Item] | None = None
        match message:
            case {"role": ("user" | "assistant") as role, "content": str() as text}:
                converted = [{"type": "message", "role": role, "content": text}]
            case {"role": ("user" | "assistant") as role, "content": list() as blocks}:
                items: list[Item] = []
                # Parts of the open message: consecutive text and image blocks share one.
                parts: list[Item] | None = None
                for block in blocks:
                    item: Item | None = None
                    match block:
                        case {"type": "text" | "image"}:
                            part = _responses_part_from_anthropic(block, role)
                            if part is None:
                                break
                            if parts is None:
                                parts = []
                                items.append({"type": "message", "role": role, "content": parts})
                            parts.append(part)
                            continue
                        case {
                            "type": "tool_use",
                            "id": str() as call_id,
                            "name": str() as name,
                            "input": dict() as tool_input,
                        }:
                            raw = tool_input.get(RAW_ARGUMENTS)
                            carried = list(tool_input) == [RAW_ARGUMENTS] and isinstance(raw, str)
                            item = {
                                "type": "function_call",
                                "call_id": call_id,
                                "name": name,
                                "arguments": raw if carried else _dump_json(tool_input),
                            }
                        case {"type": "tool_result", "tool_use_id": str() as call_id}:
                            # Anthropic lets a result omit its content; `is_error` has no place.
                            output = _convert_content(
                                block.get("content", ""),
                                part=_responses_part_from_anthropic,
                                role="tool",
                            )
                            if output is not None:
                                item = {
                                    "type": "function_call_output",
                                    "call_id": call_id,
                                    "output": output,
                                }
                        case {"type": "thinking", "thinking": str() as text}:
                            summary = [{"type": "summary_text", "text": text}]
                            item = {"type": "reasoning", "summary": summary}
                            if isinstance(block.get("signature"), str):
                                item["encrypted_content"] = block["signature"]
                        case {"type": "redacted_thinking", "data": str() as data}:
                            item = {"type": "reasoning", "summary": [], "encrypted_content": data}
                        case _:
                            pass
                    if item is None:
                        break
                    items.append(item)
                    parts = None
                else:
                    # An empty message stays a message rather than vanishing.
                    converted = items or [{"type": "message", "role": role, "content": []}]
            case _:
                pass
        if converted is None:
            untranslated.append(index)
            out.append(message)
        else:
            out.extend(converted)
    return Conversion(out, untranslated)
