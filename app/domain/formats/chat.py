"""The Chat Completions format ("chat").

- A Responses assistant turn (an assistant message, then calls) becomes one assistant message
  with its calls in `tool_calls`; `local_shell_call` becomes a function tool call named
  "local_shell" whose arguments are the `action` as compact JSON.
- A tool message carries text only: an empty output becomes `EMPTY_OUTPUT_TEXT`; an image in an
  output becomes a placeholder naming it, and the images follow, after the turn's tool messages,
  in one user message (normalization has already removed images the model cannot read).
- Chat takes no reasoning: every reasoning item is excluded as `foreign_reasoning`.
- Reading: `reasoning_content` (DeepSeek style) becomes a reasoning item of Chat provenance; a
  tool message answers a `custom_tool_call` seen earlier when its id names one.
- Lost: item ids and statuses, image `detail` when absent (it comes back as "auto").
- Messages are built fresh by the call that returns them; no argument is mutated.
"""

from __future__ import annotations

from typing import Any

from app.domain.formats.common import (
    LOCAL_SHELL_TOOL,
    Losses,
    Parsed,
    PlaceholderKind,
    Rendering,
    convert_content,
    dump_json,
    foreign_fields,
    origin_of,
    parts_or_placeholders,
    placeholder_text,
    unmodeled,
    with_origin,
)
from app.domain.items import OUTPUT_TYPES, Item, item_type

EMPTY_OUTPUT_TEXT = "(no output)"
"""A Chat tool message for an empty output: the API refuses empty tool content."""

_MEDIA_ROLES = ("user", "system", "developer")
"""Chat roles whose content may hold images and audio (assistant and tool content may not)."""

_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "reasoning_content"})


def _chat_part(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "input_text" | "output_text", "text": str() as text}, _:
            return {"type": "text", "text": text}
        case {"type": "refusal", "refusal": str() as refusal}, "assistant":
            return {"type": "refusal", "refusal": refusal}
        case {"type": "input_image", "image_url": str() as url}, _ if role in _MEDIA_ROLES:
            image: Item = {"url": url}
            if part.get("detail") is not None:
                image["detail"] = part["detail"]
            return {"type": "image_url", "image_url": image}
        case {"type": "input_audio", "input_audio": dict() as audio}, _ if role in _MEDIA_ROLES:
            return {"type": "input_audio", "input_audio": audio}
        case _:
            return None


def _responses_part_from_chat(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "text", "text": str() as text}, _:
            return {"type": "output_text" if role == "assistant" else "input_text", "text": text}
        case {"type": "refusal", "refusal": str() as refusal}, "assistant":
            return {"type": "refusal", "refusal": refusal}
        case {"type": "image_url", "image_url": {"url": str() as url}}, _ if role in _MEDIA_ROLES:
            detail = part["image_url"].get("detail")
            return {"type": "input_image", "image_url": url, "detail": detail or "auto"}
        case {"type": "input_audio", "input_audio": dict() as audio}, _ if role in _MEDIA_ROLES:
            return {"type": "input_audio", "input_audio": audio}
        case _:
            return None


def _chat_tool_content(
    output: Any, *, images_before: int
) -> tuple[str | list[Item], list[Item], list[PlaceholderKind]]:
    """A tool message's text content, the images its output held (for a user message that
    follows; `images_before` of the turn's earlier outputs come first in it), and the
    placeholders written."""
    if isinstance(output, str):
        if output:
            return output, [], []
        return EMPTY_OUTPUT_TEXT, [], ["empty_output"]
    if not isinstance(output, list):
        # Its call is in the output already: the answer stays, so that pairing holds.
        return placeholder_text(output), [], ["unsupported_part"]
    texts: list[Item] = []
    images: list[Item] = []
    kinds: list[PlaceholderKind] = []
    for part in output:
        converted = _chat_part(part, "user")
        if converted is not None and converted["type"] == "text":
            if converted["text"]:
                texts.append(converted)
        elif converted is not None and converted["type"] == "image_url":
            images.append(converted)
            number = images_before + len(images)
            kinds.append("tool_output_image")
            texts.append(
                {"type": "text", "text": f"[image {number}: in the user message that follows]"}
            )
        else:
            kinds.append("unsupported_part")
            texts.append({"type": "text", "text": placeholder_text(part)})
    if not texts:
        return EMPTY_OUTPUT_TEXT, images, [*kinds, "empty_output"]
    return texts, images, kinds


def render_chat(items: list[Item]) -> Rendering:
    out: list[Item] = []
    losses = Losses()
    # The assistant message being assembled: it is already in `out`, and later assistant-side
    # items (its calls) are folded into it until something else comes.
    turn: Item | None = None
    # Images held by the tool outputs of the current run of tool messages: Chat tool messages
    # carry text, so they follow the run in one user message.
    pending_images: list[Item] = []

    def flush_images() -> None:
        if pending_images:
            caption = {"type": "text", "text": "Images returned by the tool calls above:"}
            out.append({"role": "user", "content": [caption, *pending_images]})
            pending_images.clear()

    for index, item in enumerate(items):
        origin = origin_of(item)
        mine = origin.get("format") == "chat"
        if origin and not mine:
            losses.drop_fields(index, foreign_fields(origin))
        kind = item_type(item)
        if kind not in OUTPUT_TYPES:
            flush_images()
        call: Item | None = None
        standalone: Item | None = None
        match kind, item:
            case "reasoning", _:
                losses.exclude(index, item=item, reason="foreign_reasoning")
                continue
            case "message", {"role": "assistant", "content": content}:
                parts, kinds = parts_or_placeholders(content, part=_chat_part, role="assistant")
                losses.add_placeholders(index, kinds)
                if parts is not None:
                    turn = {"role": "assistant", "content": parts}
                    out.append(turn)
                    if mine:
                        turn.update(origin.get("message", {}))
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
                function = {"name": LOCAL_SHELL_TOOL, "arguments": dump_json(action)}
                call = {"id": call_id, "type": "function", "function": function}
            case "message", {"role": ("user" | "system" | "developer") as role, "content": content}:
                parts, kinds = parts_or_placeholders(content, part=_chat_part, role=role)
                losses.add_placeholders(index, kinds)
                if parts is not None:
                    standalone = {"role": role, "content": parts}
            case kind, {"call_id": str() as call_id, "output": output} if kind in OUTPUT_TYPES:
                tool_content, images, kinds = _chat_tool_content(
                    output, images_before=len(pending_images)
                )
                losses.add_placeholders(index, kinds)
                standalone = {"role": "tool", "tool_call_id": call_id, "content": tool_content}
                pending_images.extend(images)
            case _:
                pass
        if call is not None:
            if turn is None:
                turn = {"role": "assistant", "content": None}
                out.append(turn)
                if mine:
                    turn.update(origin.get("message", {}))
            turn.setdefault("tool_calls", []).append(call)
            continue
        turn = None
        if standalone is None:
            losses.exclude(index, item=item, reason="not_expressible")
            continue
        if mine:
            standalone.update(origin.get("message", {}))
        out.append(standalone)
    flush_images()
    for message in out:
        # Chat takes no empty content list; an empty assistant text beside calls is no text.
        if message["role"] == "assistant" and message["content"] in ([], ""):
            message["content"] = None if message.get("tool_calls") else ""
    return Rendering(out, None, losses.excluded, losses.dropped_fields, losses.placeholders)


def read_chat(messages: list[Item]) -> Parsed:
    out: list[Item] = []
    untranslated: list[int] = []
    sources: list[int] = []
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
                    else convert_content(content, part=_responses_part_from_chat, role="assistant")
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
                parts = convert_content(content, part=_responses_part_from_chat, role=role)
                if parts is not None:
                    converted = [{"type": "message", "role": role, "content": parts}]
            case {"role": "tool", "tool_call_id": str() as call_id, "content": content}:
                parts = convert_content(content, part=_responses_part_from_chat, role="tool")
                if parts is not None:
                    custom = call_id in custom_calls
                    kind = "custom_tool_call_output" if custom else "function_call_output"
                    converted = [{"type": kind, "call_id": call_id, "output": parts}]
            case _:
                pass
        if converted:
            # Message-level fields go with the first item Chat can carry back (not reasoning).
            extra = unmodeled(message, _MESSAGE_KEYS)
            carrier = next(
                (n for n, each in enumerate(converted) if each["type"] != "reasoning"), 0
            )
            converted = [
                with_origin(each, fmt="chat", message=extra if n == carrier else None)
                for n, each in enumerate(converted)
            ]
            out.extend(converted)
            sources.extend([index] * len(converted))
        else:
            untranslated.append(index)
            out.append(message)
            sources.append(index)
    return Parsed(out, untranslated, sources)
