"""The Anthropic Messages format ("anthropic").

- The leading system and developer messages become the top-level `system` text blocks; a later
  one becomes a text block of a user turn, where Anthropic reads instructions in mid-conversation.
- Only `user` and `assistant` messages, alternating, the first a user turn (a placeholder turn
  when the history starts with the assistant). Calls are `tool_use` blocks; outputs are
  `tool_result` blocks, placed first in the next user message. No empty text block is written.
- Tool inputs must be objects: `arguments` that do not parse as a JSON object (or that hold
  NaN or infinities, or would read back as the carrier) travel as
  `{"_raw_arguments": "<the string>"}`, and a custom tool call's free text as
  `{"_raw_input": "<text>"}`; both come back exactly. Parsed arguments come back as compact JSON.
- Thinking (with its signature) goes back as it came; other reasoning is `foreign_reasoning`.
- At most `MAX_CACHE_BREAKPOINTS` blocks keep a client's `cache_control` (`cache_breakpoints`).
- Lost: item ids, image `detail`, boundaries between consecutive same-role messages.
- Messages are built fresh by the call that returns them; no argument is mutated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Set
from typing import Any

from app.domain.formats.cache_breakpoints import cap_cache_breakpoints
from app.domain.formats.common import (
    LOCAL_SHELL_TOOL,
    ORIGIN_KEY,
    Block,
    ExclusionReason,
    Losses,
    Parsed,
    PlaceholderKind,
    Rendering,
    convert_content,
    dump_json,
    foreign_fields,
    merged,
    origin_of,
    part_extras,
    parts_or_placeholders,
    placeholder_text,
    reasoning_text,
    restored_parts,
    unmodeled,
    with_origin,
)
from app.domain.items import OUTPUT_TYPES, Item, item_type

RAW_ARGUMENTS = "_raw_arguments"
"""Tool-input key carrying function arguments that are not a JSON object."""

RAW_INPUT = "_raw_input"
"""Tool-input key carrying a custom tool call's free-text input."""

LEADING_USER_TEXT = "(The conversation so far follows.)"
"""The user turn opening a history that starts with the assistant."""

_PART_KEYS = frozenset({"type", "text", "source"})
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input"})
_TOOL_RESULT_KEYS = frozenset({"type", "tool_use_id", "content"})
_THINKING_KEYS = frozenset({"type", "thinking", "signature"})
_REDACTED_KEYS = frozenset({"type", "data"})
_MESSAGE_KEYS = frozenset({"role", "content"})


def _anthropic_block(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "input_text" | "output_text", "text": str() as text}, _:
            return {"type": "text", "text": text}
        case {"type": "refusal", "refusal": str() as text}, "assistant":
            return {"type": "text", "text": text}
        case {"type": "input_image", "image_url": str() as url}, ("user" | "tool"):
            header, base64_marker, data = url.partition(";base64,")
            if header.startswith("data:") and base64_marker:
                media_type = header.removeprefix("data:")
                source = {"type": "base64", "media_type": media_type, "data": data}
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


def _finite_float(token: str) -> float:
    # NaN and infinities are not JSON: an Anthropic tool input holding one would be rejected.
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {token}")
    return value


_ARGUMENTS_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_finite_float)


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        tool_input = _ARGUMENTS_DECODER.decode(arguments)
    except (ValueError, RecursionError):
        tool_input = None
    # Anthropic only takes an object; anything else, or an object that would read back as a
    # carrier, travels raw so the round trip restores the exact string.
    if not isinstance(tool_input, dict) or list(tool_input) in ([RAW_ARGUMENTS], [RAW_INPUT]):
        return {RAW_ARGUMENTS: arguments}
    return tool_input


def _anthropic_blocks(
    item: Item, *, mine: bool
) -> tuple[str, list[Item] | str, list[PlaceholderKind]] | None:
    """The role and blocks an item becomes in Anthropic (a string: a lone message's text), and
    the placeholders written; None when Anthropic cannot carry it."""
    match item_type(item), item:
        case "message", {"role": ("user" | "assistant") as role, "content": content}:
            parts, kinds = parts_or_placeholders(content, part=_anthropic_block, role=role)
            return None if parts is None else (role, parts, kinds)
        case "message", {"role": "system" | "developer", "content": content}:
            parts, kinds = parts_or_placeholders(content, part=_anthropic_block, role="system")
            return None if parts is None else ("user", parts, kinds)
        case "function_call", {
            "call_id": str() as call_id,
            "name": str() as name,
            "arguments": str() as arguments,
        }:
            tool_use = {"type": "tool_use", "id": call_id, "name": name}
            return "assistant", [{**tool_use, "input": _tool_input(arguments)}], []
        case "custom_tool_call", {
            "call_id": str() as call_id,
            "name": str() as name,
            "input": str() as text,
        }:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {RAW_INPUT: text}}
            return "assistant", [block], []
        case "local_shell_call", {"call_id": str() as call_id, "action": dict() as action}:
            block = {"type": "tool_use", "id": call_id, "name": LOCAL_SHELL_TOOL, "input": action}
            return "assistant", [block], []
        case "reasoning", _ if mine:
            thought = reasoning_text(item)
            signature = item.get("encrypted_content")
            if thought is not None and isinstance(signature, str):
                thinking = {"type": "thinking", "thinking": thought, "signature": signature}
                return "assistant", [thinking], []
            if isinstance(signature, str):
                return "assistant", [{"type": "redacted_thinking", "data": signature}], []
            return None
        case kind, {"call_id": str() as call_id, "output": output} if kind in OUTPUT_TYPES:
            result, kinds = parts_or_placeholders(output, part=_anthropic_block, role="tool")
            if result is None:
                # Its call is in the output already: the answer stays, so that pairing holds.
                kinds = ["unsupported_part"]
                result = placeholder_text(output)
            tool_result: Item = {"type": "tool_result", "tool_use_id": call_id}
            if isinstance(result, list):
                result = [p for p in result if p.get("type") != "text" or p["text"]]
            if result:  # an empty result is sent without content
                tool_result["content"] = result
            return "user", [tool_result], kinds
        case _:
            return None


def _with_provider_fields(
    blocks: list[Item], *, item: Item, origin: dict[str, Any]
) -> tuple[list[Item], list[str]]:
    """`blocks` with the fields an Anthropic read recorded put back, and the paths of the part
    fields that no longer line up with the parts (to report dropped)."""
    if item_type(item) == "message":
        restored = restored_parts(blocks, origin)
        if restored is None:
            return blocks, [f"content[{i}]" for i in range(len(origin["parts"]))]
        return restored, []
    first = merged(blocks[0], origin.get("fields", {}))
    inner = first.get("content")
    restored = restored_parts(inner, origin) if isinstance(inner, list) else None
    lost: list[str] = []
    if restored is not None:
        first["content"] = restored
    elif origin.get("parts"):
        lost = [f"content[{i}]" for i in range(len(origin["parts"]))]
    return [first, *blocks[1:]], lost


def _without_empty_text(blocks: list[Item]) -> list[Item]:
    return [b for b in blocks if not (b.get("type") == "text" and b.get("text") == "")]


def _results_first(message: Item) -> Item:
    """Tool results open the user message that answers a turn's tool uses, as Anthropic asks."""
    content = message["content"]
    if message["role"] == "user" and isinstance(content, list):
        results = [b for b in content if b.get("type") == "tool_result"]
        if results and content[: len(results)] != results:
            rest = [b for b in content if b.get("type") != "tool_result"]
            return {**message, "content": results + rest}
    return message


def render_anthropic(items: list[Item]) -> Rendering:
    losses = Losses()
    system: list[Item] = []
    messages: list[Item] = []
    locations: list[Block | None] = [None] * len(items)
    leading = True  # still in the run of system and developer messages that opens the history
    for index, item in enumerate(items):
        origin = origin_of(item)
        mine = origin.get("format") == "anthropic"
        if origin and not mine:
            losses.drop_fields(index, foreign_fields(origin))
        instruction = item_type(item) == "message" and item.get("role") in ("system", "developer")
        leading = leading and instruction
        converted = _anthropic_blocks(item, mine=mine)
        if converted is None:
            foreign = item_type(item) == "reasoning"
            reason: ExclusionReason = "foreign_reasoning" if foreign else "not_expressible"
            losses.exclude(index, item=item, reason=reason)
            continue
        role, content, kinds = converted
        losses.add_placeholders(index, kinds)
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if mine:
            blocks, lost = _with_provider_fields(blocks, item=item, origin=origin)
            losses.drop_fields(index, lost)
        blocks = _without_empty_text(blocks)
        if not blocks:
            losses.exclude(index, item=item, reason="not_expressible")
            continue
        if leading:
            system.extend(blocks)
            locations[index] = Block(None, len(system) - 1)
            continue
        previous = messages[-1] if messages else None
        if previous is not None and previous["role"] == role:
            if isinstance(previous["content"], str):
                previous["content"] = [{"type": "text", "text": previous["content"]}]
            previous["content"].extend(blocks)
        else:
            # A lone string message keeps its string form so it round-trips exactly.
            lone = isinstance(content, str) and bool(content)
            previous = {"role": role, "content": content if lone else blocks}
            messages.append(previous)
        if mine:
            previous.update(
                {k: v for k, v in origin.get("message", {}).items() if k not in previous}
            )
        last = None if isinstance(previous["content"], str) else len(previous["content"]) - 1
        locations[index] = Block(len(messages) - 1, last)
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": LEADING_USER_TEXT})
        losses.add_placeholders(0, ["leading_user_turn"])
        locations = [
            loc if loc is None or loc.message is None else Block(loc.message + 1, loc.block)
            for loc in locations
        ]
    rendering = Rendering(
        [_results_first(message) for message in messages],
        system or None,
        losses.excluded,
        losses.dropped_fields,
        losses.placeholders,
        locations,
    )
    # Breakpoints a client sent ride along in its provider fields, possibly more than Anthropic
    # accepts: none of them is the service's own, so the latest are the ones kept.
    return cap_cache_breakpoints(rendering, keep=frozenset())


def read_anthropic(messages: list[Item]) -> Parsed:
    out: list[Item] = []
    untranslated: list[int] = []
    sources: list[int] = []
    # A tool result does not say which kind of call it answers; the call it names does.
    custom_calls: set[str] = set()
    for index, message in enumerate(messages):
        converted: list[Item] | None = None
        match message:
            case {"role": ("user" | "assistant") as role, "content": str() as text}:
                converted = [{"type": "message", "role": role, "content": text}]
            case {"role": ("user" | "assistant") as role, "content": list() as blocks}:
                converted = _items_of_blocks(role, blocks=blocks, custom_calls=custom_calls)
                calls = [c["call_id"] for c in converted or [] if c["type"] == "custom_tool_call"]
                custom_calls.update(calls)
            case _:
                pass
        if converted is None:
            untranslated.append(index)
            out.append(message)
            sources.append(index)
            continue
        extra = unmodeled(message, _MESSAGE_KEYS)
        if extra:
            first = converted[0]
            converted[0] = {
                **first,
                ORIGIN_KEY: {**origin_of(first), "format": "anthropic", "message": extra},
            }
        out.extend(converted)
        sources.extend([index] * len(converted))
    return Parsed(out, untranslated, sources)


def _items_of_blocks(role: str, *, blocks: list[Any], custom_calls: Set[str]) -> list[Item] | None:
    """The Responses items of one Anthropic message's blocks; None if any block is unreadable.
    `custom_calls` names the custom tool calls of earlier messages."""
    items: list[Item] = []
    # The open message: consecutive text and image blocks share one, with their extras.
    parts: list[Item] | None = None
    extras: list[dict[str, Any]] = []
    pending_custom: list[str] = []

    def close_message() -> None:
        if parts is not None:
            message = {"type": "message", "role": role, "content": parts}
            carried = extras if any(extras) else None
            items.append(with_origin(message, fmt="anthropic", parts=carried))

    for block in blocks:
        item: Item | None = None
        fields: dict[str, Any] = {}
        inner: list[dict[str, Any]] | None = None
        match block:
            case {"type": "text" | "image"}:
                part = _responses_part_from_anthropic(block, role)
                if part is None:
                    return None
                if parts is None:
                    parts, extras = [], []
                parts.append(part)
                extras.append(unmodeled(block, _PART_KEYS))
                continue
            case {
                "type": "tool_use",
                "id": str() as call_id,
                "name": str() as name,
                "input": dict() as tool_input,
            }:
                fields = unmodeled(block, _TOOL_USE_KEYS)
                raw = tool_input.get(RAW_ARGUMENTS)
                text = tool_input.get(RAW_INPUT)
                if list(tool_input) == [RAW_INPUT] and isinstance(text, str):
                    item = {
                        "type": "custom_tool_call",
                        "call_id": call_id,
                        "name": name,
                        "input": text,
                    }
                    pending_custom.append(call_id)
                else:
                    carried = list(tool_input) == [RAW_ARGUMENTS] and isinstance(raw, str)
                    item = {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": name,
                        "arguments": raw if carried else dump_json(tool_input),
                    }
            case {"type": "tool_result", "tool_use_id": str() as call_id}:
                # Anthropic lets a result omit its content.
                content = block.get("content", "")
                output = convert_content(content, part=_responses_part_from_anthropic, role="tool")
                if output is not None:
                    fields = unmodeled(block, _TOOL_RESULT_KEYS)
                    inner = part_extras(content, _PART_KEYS) if isinstance(content, list) else []
                    custom = call_id in custom_calls or call_id in pending_custom
                    kind = "custom_tool_call_output" if custom else "function_call_output"
                    item = {"type": kind, "call_id": call_id, "output": output}
            case {"type": "thinking", "thinking": str() as text}:
                fields = unmodeled(block, _THINKING_KEYS)
                item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
                if isinstance(block.get("signature"), str):
                    item["encrypted_content"] = block["signature"]
            case {"type": "redacted_thinking", "data": str() as data}:
                fields = unmodeled(block, _REDACTED_KEYS)
                item = {"type": "reasoning", "summary": [], "encrypted_content": data}
            case _:
                pass
        if item is None:
            return None
        close_message()
        parts = None
        items.append(with_origin(item, fmt="anthropic", fields=fields, parts=inner))
    close_message()
    # An empty message stays a message rather than vanishing.
    return items or [{"type": "message", "role": role, "content": []}]
