"""Conversion between canonical Responses items and the Chat Completions and Anthropic wire formats.

Reading (`to_responses`) keeps everything: an element the service cannot parse is copied
unchanged into the Responses-form list (it stays in the log, excluded from model-visible
history) and its index listed in `Parsed.untranslated`. What a format carries that Responses
does not model rides along on the item under `ORIGIN_KEY` (see below), so nothing sent is lost.

Writing (`from_responses`) gives output the provider accepts, or reports why not:

- Nothing inexpressible is passed through: an item the target cannot carry is left out and
  listed in `Rendering.excluded` with its reason; a content part it cannot carry becomes a short
  text placeholder, listed in `Rendering.placeholders`; a field it cannot carry is listed in
  `Rendering.dropped_fields`. Nothing is dropped silently.
- Opaque reasoning stays with the provider that produced it: Anthropic thinking (with its
  signature) only goes back to Anthropic, OpenAI reasoning (encrypted or not) only to the
  Responses API; elsewhere it is excluded as `foreign_reasoning`. Chat takes no reasoning.
- Pure and total: for any list of JSON objects every function returns; inputs are never mutated
  (outputs are new top-level objects that may share nested values with the input).
- `to_responses(from_responses(items, fmt).items, fmt)` gives back, for every item not
  excluded, its role and parts, call ids, names and arguments, outputs, and provider fields.

Provider fields (`ORIGIN_KEY`): an item read from Chat or Anthropic records
`{"format", "fields", "parts", "message"}`: the keys of its source block (`fields`), of its
content parts (`parts`, aligned by index) and of its source message (`message`, on the first
item of that message) that the Responses form does not model, such as Anthropic `is_error` and
`cache_control`. Reasoning always records its format: that is its provenance. Writing back to
the same format puts the fields back; writing to another format reports them as dropped.

Chat Completions ("chat"):
- A Responses assistant turn (an assistant message, then calls) becomes one assistant message
  with its calls in `tool_calls`; `local_shell_call` becomes a function tool call named
  "local_shell" whose arguments are the `action` as compact JSON.
- A tool message carries text only: an empty output becomes `EMPTY_OUTPUT_TEXT`; an image in an
  output becomes a placeholder naming it, and the images follow, after the turn's tool messages,
  in one user message (normalization has already removed images the model cannot read).
- Reading: `reasoning_content` (DeepSeek style) becomes a reasoning item of Chat provenance; a
  tool message answers a `custom_tool_call` seen earlier when its id names one.
- Lost: item ids and statuses, image `detail` when absent (it comes back as "auto").

Anthropic Messages ("anthropic"):
- The leading system and developer messages become the top-level `system` text blocks; a later
  one becomes a text block of a user turn, where Anthropic reads instructions in mid-conversation.
- Only `user` and `assistant` messages, alternating, the first a user turn (a placeholder turn
  when the history starts with the assistant). Calls are `tool_use` blocks; outputs are
  `tool_result` blocks, placed first in the next user message. No empty text block is written.
- Tool inputs must be objects: `arguments` that do not parse as a JSON object (or that hold
  NaN or infinities, or would read back as the carrier) travel as
  `{"_raw_arguments": "<the string>"}`, and a custom tool call's free text as
  `{"_raw_input": "<text>"}`; both come back exactly. Parsed arguments come back as compact JSON.
- Lost: item ids, image `detail`, boundaries between consecutive same-role messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from app.domain.items import OUTPUT_TYPES, Format, Item, item_type

RAW_ARGUMENTS = "_raw_arguments"
"""Tool-input key carrying function arguments that are not a JSON object (Anthropic)."""

RAW_INPUT = "_raw_input"
"""Tool-input key carrying a custom tool call's free-text input (Anthropic)."""

LOCAL_SHELL_TOOL = "local_shell"
"""Tool name a `local_shell_call` takes in formats without a local shell item."""

ORIGIN_KEY = "contextd.origin"
"""Item key holding what an item read from another format carries beyond the Responses form."""

REASONING_SEPARATOR = "\n\n"
"""Joins the summary parts of one reasoning item into the single text other formats hold."""

EMPTY_OUTPUT_TEXT = "(no output)"
"""A Chat tool message for an empty output: the API refuses empty tool content."""

LEADING_USER_TEXT = "(The conversation so far follows.)"
"""The user turn opening an Anthropic history that starts with the assistant."""

_CHAT_MEDIA_ROLES = ("user", "system", "developer")
"""Chat roles whose content may hold images and audio (assistant and tool content may not)."""

ExclusionReason = Literal["foreign_reasoning", "not_expressible"]
PlaceholderKind = Literal[
    "empty_output", "tool_output_image", "unsupported_part", "leading_user_turn"
]

PartConverter = Callable[[Any, str], Item | None]
"""Converts one content part for a role; None when that role cannot carry it in the target."""


@dataclass(frozen=True)
class Parsed:
    """A history read into Responses form."""

    items: list[Item]
    untranslated: list[int]
    """Input indices of elements kept unchanged because the service cannot parse them."""
    sources: list[int]
    """For each output item, the index of the input element it came from."""


@dataclass(frozen=True)
class Excluded:
    index: int
    type: str
    reason: ExclusionReason


@dataclass(frozen=True)
class DroppedField:
    index: int
    field: str
    """The field's path in the source format, e.g. `is_error` or `content[0].cache_control`."""


@dataclass(frozen=True)
class Placeholder:
    index: int
    kind: PlaceholderKind


@dataclass(frozen=True)
class Block:
    """Where an input item's last piece landed: `system[block]`, else
    `messages[message].content[block]` (`block` None when the content is a plain string)."""

    message: int | None
    block: int | None


@dataclass(frozen=True)
class Rendering:
    """A Responses history written in a wire format, with everything it could not carry."""

    items: list[Item]
    system: list[Item] | None = None
    """Anthropic only: the top-level system text blocks."""
    excluded: list[Excluded] = field(default_factory=list)
    dropped_fields: list[DroppedField] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)
    locations: list[Block | None] = field(default_factory=list)
    """Anthropic only: for each input item, where its last block landed (None: excluded)."""

    @property
    def untranslated(self) -> list[int]:
        """Indices of input items left out of the output."""
        return [entry.index for entry in self.excluded]

    def report(self) -> dict[str, list[dict[str, Any]]]:
        return {
            "excluded": [vars(entry) for entry in self.excluded],
            "dropped_fields": [vars(entry) for entry in self.dropped_fields],
            "placeholders": [vars(entry) for entry in self.placeholders],
        }


def to_responses(items: list[Item], fmt: Format) -> Parsed:
    """Read a history in wire format `fmt` into canonical Responses items."""
    match fmt:
        case "responses":
            return Parsed(list(items), [], list(range(len(items))))
        case "chat":
            return _chat_to_responses(items)
        case "anthropic":
            return _anthropic_to_responses(items)
        case _:
            assert_never(fmt)


def from_responses(items: list[Item], fmt: Format) -> Rendering:
    """Write canonical Responses items in wire format `fmt`."""
    match fmt:
        case "responses":
            return _responses_from_responses(items)
        case "chat":
            return _chat_from_responses(items)
        case "anthropic":
            return _anthropic_from_responses(items)
        case _:
            assert_never(fmt)


# --- Shared helpers ----------------------------------------------------------------------


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
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list) and parts:
            texts = [each.get("text") if isinstance(each, dict) else None for each in parts]
            strings = [text for text in texts if isinstance(text, str)]
            return REASONING_SEPARATOR.join(strings) if len(strings) == len(texts) else None
    return None


def _origin(item: Item) -> dict[str, Any]:
    origin = item.get(ORIGIN_KEY)
    return origin if isinstance(origin, dict) else {}


def _without_origin(item: Item) -> Item:
    return {k: v for k, v in item.items() if k != ORIGIN_KEY} if ORIGIN_KEY in item else item


def _with_origin(item: Item, fmt: Format, **residual: Any) -> Item:
    """`item` carrying the fields of its source it cannot model; reasoning always says where it
    came from."""
    kept = {key: value for key, value in residual.items() if value}
    if kept or item_type(item) == "reasoning":
        return {**item, ORIGIN_KEY: {"format": fmt, **kept}}
    return item


def _extra(element: dict[str, Any], modeled: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in element.items() if k not in modeled}


def _part_extras(parts: list[Any], modeled: frozenset[str]) -> list[dict[str, Any]]:
    """Per-part unmodeled keys, aligned with `parts`; empty when no part has any."""
    extras = [_extra(p, modeled) if isinstance(p, dict) else {} for p in parts]
    return extras if any(extras) else []


def _foreign_fields(origin: dict[str, Any]) -> list[str]:
    """The paths of the provider fields an origin holds, for reporting them dropped."""
    paths = [str(key) for key in origin.get("fields", {})]
    for index, extra in enumerate(origin.get("parts", [])):
        paths.extend(f"content[{index}].{key}" for key in extra)
    paths.extend(f"message.{key}" for key in origin.get("message", {}))
    return paths


def _restore_parts(blocks: list[Item], origin: dict[str, Any]) -> bool:
    """Put the parts' provider fields back, when the parts still line up; False if not."""
    extras = origin.get("parts", [])
    if not extras:
        return True
    if len(extras) != len(blocks):
        return False
    for block, extra in zip(blocks, extras, strict=True):
        block.update(extra)
    return True


class _Report:
    """Collects what a rendering could not carry."""

    def __init__(self) -> None:
        self.excluded: list[Excluded] = []
        self.dropped_fields: list[DroppedField] = []
        self.placeholders: list[Placeholder] = []

    def exclude(self, index: int, item: Item, reason: ExclusionReason) -> None:
        self.excluded.append(Excluded(index, item_type(item), reason))

    def drop_fields(self, index: int, paths: list[str]) -> None:
        self.dropped_fields.extend(DroppedField(index, path) for path in paths)

    def placeholder(self, index: int, kind: PlaceholderKind) -> None:
        self.placeholders.append(Placeholder(index, kind))


def _placeholder_text(part: Any) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    return f"[{kind if isinstance(kind, str) else 'content'} part omitted: not supported here]"


def _parts_or_placeholders(
    content: Any, *, part: PartConverter, role: str, index: int, report: _Report
) -> str | list[Item] | None:
    """Content converted part by part; a part the target cannot carry becomes a placeholder text.
    None when the content is not a string or a list."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    out: list[Item] = []
    for each in content:
        converted = part(each, role)
        if converted is None:
            report.placeholder(index, "unsupported_part")
            converted = {"type": "text", "text": _placeholder_text(each)}
        out.append(converted)
    return out


# --- Responses ---------------------------------------------------------------------------


def _responses_from_responses(items: list[Item]) -> Rendering:
    """Responses stays Responses, without provider fields and without reasoning of another
    provider. OpenAI reasoning stays as it came: with its `id`, or without one as the Codex CLI
    sends it back in stateless use."""
    out: list[Item] = []
    report = _Report()
    for index, item in enumerate(items):
        origin = _origin(item)
        if item_type(item) == "reasoning" and origin:
            report.exclude(index, item, "foreign_reasoning")
            continue
        if origin:
            report.drop_fields(index, _foreign_fields(origin))
        out.append(_without_origin(item))
    return Rendering(out, None, report.excluded, report.dropped_fields, report.placeholders)


# --- Chat Completions ---------------------------------------------------------------------

_CHAT_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
)


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


def _chat_tool_content(
    output: Any, *, index: int, report: _Report, images_before: int
) -> tuple[str | list[Item], list[Item]]:
    """A tool message's text content and the images its output held (for a user message that
    follows; `images_before` of the turn's earlier outputs come first in it)."""
    if isinstance(output, str):
        if output:
            return output, []
        report.placeholder(index, "empty_output")
        return EMPTY_OUTPUT_TEXT, []
    if not isinstance(output, list):
        # Its call is in the output already: the answer stays, so that pairing holds.
        report.placeholder(index, "unsupported_part")
        return _placeholder_text(output), []
    texts: list[Item] = []
    images: list[Item] = []
    for part in output:
        converted = _chat_part(part, "user")
        if converted is not None and converted["type"] == "text":
            if converted["text"]:
                texts.append(converted)
        elif converted is not None and converted["type"] == "image_url":
            images.append(converted)
            number = images_before + len(images)
            report.placeholder(index, "tool_output_image")
            texts.append(
                {"type": "text", "text": f"[image {number}: in the user message that follows]"}
            )
        else:
            report.placeholder(index, "unsupported_part")
            texts.append({"type": "text", "text": _placeholder_text(part)})
    if not texts:
        report.placeholder(index, "empty_output")
        return EMPTY_OUTPUT_TEXT, images
    return texts, images


def _chat_from_responses(items: list[Item]) -> Rendering:
    out: list[Item] = []
    report = _Report()
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
        origin = _origin(item)
        mine = origin.get("format") == "chat"
        if origin and not mine:
            report.drop_fields(index, _foreign_fields(origin))
        kind = item_type(item)
        if kind not in OUTPUT_TYPES:
            flush_images()
        call: Item | None = None
        standalone: Item | None = None
        match kind, item:
            case "reasoning", _:
                report.exclude(index, item, "foreign_reasoning")
                continue
            case "message", {"role": "assistant", "content": content}:
                parts = _parts_or_placeholders(
                    content, part=_chat_part, role="assistant", index=index, report=report
                )
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
                function = {"name": LOCAL_SHELL_TOOL, "arguments": _dump_json(action)}
                call = {"id": call_id, "type": "function", "function": function}
            case "message", {"role": ("user" | "system" | "developer") as role, "content": content}:
                parts = _parts_or_placeholders(
                    content, part=_chat_part, role=role, index=index, report=report
                )
                if parts is not None:
                    standalone = {"role": role, "content": parts}
            case kind, {"call_id": str() as call_id, "output": output} if kind in OUTPUT_TYPES:
                tool_content, images = _chat_tool_content(
                    output, index=index, report=report, images_before=len(pending_images)
                )
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
            report.exclude(index, item, "not_expressible")
            continue
        if mine:
            standalone.update(origin.get("message", {}))
        out.append(standalone)
    flush_images()
    for message in out:
        # Chat takes no empty content list; an empty assistant text beside calls is no text.
        if message["role"] == "assistant" and message["content"] in ([], ""):
            message["content"] = None if message.get("tool_calls") else ""
    return Rendering(out, None, report.excluded, report.dropped_fields, report.placeholders)


def _chat_to_responses(messages: list[Item]) -> Parsed:
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
            # Message-level fields go with the first item Chat can carry back (not reasoning).
            extra = _extra(message, _CHAT_MESSAGE_KEYS)
            carrier = next(
                (n for n, each in enumerate(converted) if each["type"] != "reasoning"), 0
            )
            converted = [
                _with_origin(each, "chat", message=extra if n == carrier else None)
                for n, each in enumerate(converted)
            ]
            out.extend(converted)
            sources.extend([index] * len(converted))
        else:
            untranslated.append(index)
            out.append(message)
            sources.append(index)
    return Parsed(out, untranslated, sources)


# --- Anthropic Messages -------------------------------------------------------------------

_TEXT_KEYS = frozenset({"type", "text"})
_IMAGE_KEYS = frozenset({"type", "source"})
_PART_KEYS = _TEXT_KEYS | _IMAGE_KEYS
_TOOL_USE_KEYS = frozenset({"type", "id", "name", "input"})
_TOOL_RESULT_KEYS = frozenset({"type", "tool_use_id", "content"})
_THINKING_KEYS = frozenset({"type", "thinking", "signature"})
_REDACTED_KEYS = frozenset({"type", "data"})
_MESSAGE_KEYS = frozenset({"role", "content"})
_CACHEABLE = frozenset({"text", "image", "tool_use", "tool_result"})
"""Block types that may carry `cache_control` (thinking blocks may not)."""
MAX_CACHE_BREAKPOINTS = 4
"""Anthropic refuses a request with more blocks carrying `cache_control`."""


def _anthropic_block(part: Any, role: str) -> Item | None:
    match part, role:
        case {"type": "input_text" | "output_text", "text": str() as text}, _:
            return {"type": "text", "text": text}
        case {"type": "refusal", "refusal": str() as text}, "assistant":
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
    item: Item, *, mine: bool, index: int, report: _Report
) -> tuple[str, list[Item] | str] | None:
    """The role and blocks an item becomes in Anthropic (a string: a lone message's text);
    None when Anthropic cannot carry it."""
    match item_type(item), item:
        case "message", {"role": ("user" | "assistant") as role, "content": content}:
            parts = _parts_or_placeholders(
                content, part=_anthropic_block, role=role, index=index, report=report
            )
            return None if parts is None else (role, parts)
        case "message", {"role": "system" | "developer", "content": content}:
            parts = _parts_or_placeholders(
                content, part=_anthropic_block, role="system", index=index, report=report
            )
            return None if parts is None else ("user", parts)
        case "function_call", {
            "call_id": str() as call_id,
            "name": str() as name,
            "arguments": str() as arguments,
        }:
            tool_use = {"type": "tool_use", "id": call_id, "name": name}
            return "assistant", [{**tool_use, "input": _tool_input(arguments)}]
        case "custom_tool_call", {
            "call_id": str() as call_id,
            "name": str() as name,
            "input": str() as text,
        }:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {RAW_INPUT: text}}
            return "assistant", [block]
        case "local_shell_call", {"call_id": str() as call_id, "action": dict() as action}:
            block = {"type": "tool_use", "id": call_id, "name": LOCAL_SHELL_TOOL, "input": action}
            return "assistant", [block]
        case "reasoning", _ if mine:
            thought = _reasoning_text(item)
            signature = item.get("encrypted_content")
            if thought is not None and isinstance(signature, str):
                thinking = {"type": "thinking", "thinking": thought, "signature": signature}
                return "assistant", [thinking]
            if isinstance(signature, str):
                return "assistant", [{"type": "redacted_thinking", "data": signature}]
            return None
        case kind, {"call_id": str() as call_id, "output": output} if kind in OUTPUT_TYPES:
            result = _parts_or_placeholders(
                output, part=_anthropic_block, role="tool", index=index, report=report
            )
            if result is None:
                # Its call is in the output already: the answer stays, so that pairing holds.
                report.placeholder(index, "unsupported_part")
                result = _placeholder_text(output)
            tool_result: Item = {"type": "tool_result", "tool_use_id": call_id}
            if isinstance(result, list):
                result = [p for p in result if p.get("type") != "text" or p["text"]]
            if result:  # an empty result is sent without content
                tool_result["content"] = result
            return "user", [tool_result]
        case _:
            return None


def _without_empty_text(blocks: list[Item]) -> list[Item]:
    return [b for b in blocks if not (b.get("type") == "text" and b.get("text") == "")]


def _anthropic_from_responses(items: list[Item]) -> Rendering:
    report = _Report()
    system: list[Item] = []
    messages: list[Item] = []
    locations: list[Block | None] = [None] * len(items)
    leading = True  # still in the run of system and developer messages that opens the history
    for index, item in enumerate(items):
        origin = _origin(item)
        mine = origin.get("format") == "anthropic"
        if origin and not mine:
            report.drop_fields(index, _foreign_fields(origin))
        instruction = item_type(item) == "message" and item.get("role") in ("system", "developer")
        leading = leading and instruction
        converted = _anthropic_blocks(item, mine=mine, index=index, report=report)
        if converted is None:
            reasoning = item_type(item) == "reasoning"
            report.exclude(index, item, "foreign_reasoning" if reasoning else "not_expressible")
            continue
        role, content = converted
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if mine:
            if item_type(item) != "message":
                blocks[0].update(origin.get("fields", {}))
                inner = blocks[0].get("content")
                restored = isinstance(inner, list) and _restore_parts(inner, origin)
                if origin.get("parts") and not restored:
                    report.drop_fields(
                        index, [f"content[{i}]" for i in range(len(origin["parts"]))]
                    )
            elif not _restore_parts(blocks, origin):
                report.drop_fields(index, [f"content[{i}]" for i in range(len(origin["parts"]))])
        blocks = _without_empty_text(blocks)
        if not blocks:
            report.exclude(index, item, "not_expressible")
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
        report.placeholder(0, "leading_user_turn")
        locations = [
            loc if loc is None or loc.message is None else Block(loc.message + 1, loc.block)
            for loc in locations
        ]
    _results_first(messages)
    _cap_cache_control(system, messages, report)
    return Rendering(
        messages,
        system or None,
        report.excluded,
        report.dropped_fields,
        report.placeholders,
        locations,
    )


def _results_first(messages: list[Item]) -> None:
    """Tool results open the user message that answers a turn's tool uses, as Anthropic asks."""
    for message in messages:
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            results = [b for b in content if b.get("type") == "tool_result"]
            if results and content[: len(results)] != results:
                message["content"] = results + [
                    b for b in content if b.get("type") != "tool_result"
                ]


def _cache_control_positions(system: list[Item], messages: list[Item]) -> list[Block]:
    """Every block of a request that carries `cache_control`, in request order."""
    positions = [Block(None, b) for b, block in enumerate(system) if "cache_control" in block]
    for m, message in enumerate(messages):
        if isinstance(message["content"], list):
            positions.extend(
                Block(m, b)
                for b, block in enumerate(message["content"])
                if "cache_control" in block
            )
    return positions


def _cap_cache_control(system: list[Item], messages: list[Item], report: _Report) -> None:
    """Keeps the last `MAX_CACHE_BREAKPOINTS` breakpoints a client sent; earlier ones are removed
    (reported at index 0: a breakpoint belongs to the request, not to one item)."""
    marked = _cache_control_positions(system, messages)
    for where in marked[: max(0, len(marked) - MAX_CACHE_BREAKPOINTS)]:
        del _block_in(system, messages, where)["cache_control"]
        report.drop_fields(0, ["cache_control"])


def trim_cache_breakpoints(
    rendering: Rendering, *, keep: set[tuple[int | None, int | None]]
) -> None:
    """Removes the earliest breakpoints not in `keep` (the service's own) until the request has
    at most `MAX_CACHE_BREAKPOINTS`; each removal is reported as a dropped field."""
    system = rendering.system or []
    marked = _cache_control_positions(system, rendering.items)
    removable = [where for where in marked if (where.message, where.block) not in keep]
    for where in removable[: max(0, len(marked) - MAX_CACHE_BREAKPOINTS)]:
        del _block_in(system, rendering.items, where)["cache_control"]
        rendering.dropped_fields.append(DroppedField(0, "cache_control"))


def place_cache_breakpoint(rendering: Rendering, index: int) -> Block | None:
    """Marks the last cacheable block at or before where input item `index` landed with an
    ephemeral `cache_control`; the block marked, or None when there is none."""
    location = next(
        (loc for loc in reversed(rendering.locations[: index + 1]) if loc is not None), None
    )
    if location is None:
        return None
    for where in _blocks_backwards(rendering, location):
        target = _block_at(rendering, where)
        if target.get("type") in _CACHEABLE:
            target["cache_control"] = {"type": "ephemeral"}
            return where
    return None


def _blocks_backwards(rendering: Rendering, start: Block) -> Iterator[Block]:
    """Block positions from `start` back to the first system block, in reverse request order.
    A plain-string message reached on the way becomes one text block, so it can be marked."""
    if start.message is not None:
        for m in range(start.message, -1, -1):
            message = rendering.items[m]
            if isinstance(message["content"], str):
                message["content"] = [{"type": "text", "text": message["content"]}]
            top = start.block if m == start.message and start.block is not None else None
            last = len(message["content"]) - 1 if top is None else top
            yield from (Block(m, b) for b in range(last, -1, -1))
        top_system = len(rendering.system or []) - 1
    else:
        top_system = start.block if start.block is not None else -1
    yield from (Block(None, b) for b in range(top_system, -1, -1))


def _block_at(rendering: Rendering, where: Block) -> Item:
    return _block_in(rendering.system or [], rendering.items, where)


def _block_in(system: list[Item], messages: list[Item], where: Block) -> Item:
    assert where.block is not None
    if where.message is None:
        return system[where.block]
    content: list[Item] = messages[where.message]["content"]
    return content[where.block]


def _anthropic_to_responses(messages: list[Item]) -> Parsed:
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
                converted = _anthropic_blocks_to_items(role, blocks, custom_calls)
            case _:
                pass
        if converted is None:
            untranslated.append(index)
            out.append(message)
            sources.append(index)
            continue
        extra = _extra(message, _MESSAGE_KEYS)
        if extra:
            first = converted[0]
            converted[0] = {
                **first,
                ORIGIN_KEY: {**_origin(first), "format": "anthropic", "message": extra},
            }
        out.extend(converted)
        sources.extend([index] * len(converted))
    return Parsed(out, untranslated, sources)


def _anthropic_blocks_to_items(
    role: str, blocks: list[Any], custom_calls: set[str]
) -> list[Item] | None:
    """The Responses items of one Anthropic message's blocks; None if any block is unreadable.
    Adds the custom calls it reads to `custom_calls`."""
    items: list[Item] = []
    # The open message: consecutive text and image blocks share one, with their extras.
    parts: list[Item] | None = None
    extras: list[dict[str, Any]] = []
    pending_custom: list[str] = []

    def close_message() -> None:
        if parts is not None:
            message = {"type": "message", "role": role, "content": parts}
            items.append(_with_origin(message, "anthropic", parts=extras if any(extras) else None))

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
                extras.append(_extra(block, _PART_KEYS))
                continue
            case {
                "type": "tool_use",
                "id": str() as call_id,
                "name": str() as name,
                "input": dict() as tool_input,
            }:
                fields = _extra(block, _TOOL_USE_KEYS)
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
                        "arguments": raw if carried else _dump_json(tool_input),
                    }
            case {"type": "tool_result", "tool_use_id": str() as call_id}:
                # Anthropic lets a result omit its content.
                content = block.get("content", "")
                output = _convert_content(content, part=_responses_part_from_anthropic, role="tool")
                if output is not None:
                    fields = _extra(block, _TOOL_RESULT_KEYS)
                    inner = _part_extras(content, _PART_KEYS) if isinstance(content, list) else []
                    custom = call_id in custom_calls or call_id in pending_custom
                    kind = "custom_tool_call_output" if custom else "function_call_output"
                    item = {"type": kind, "call_id": call_id, "output": output}
            case {"type": "thinking", "thinking": str() as text}:
                fields = _extra(block, _THINKING_KEYS)
                item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
                if isinstance(block.get("signature"), str):
                    item["encrypted_content"] = block["signature"]
            case {"type": "redacted_thinking", "data": str() as data}:
                fields = _extra(block, _REDACTED_KEYS)
                item = {"type": "reasoning", "summary": [], "encrypted_content": data}
            case _:
                pass
        if item is None:
            return None
        close_message()
        parts = None
        items.append(_with_origin(item, "anthropic", fields=fields, parts=inner))
    close_message()
    custom_calls.update(pending_custom)
    # An empty message stays a message rather than vanishing.
    return items or [{"type": "message", "role": role, "content": []}]
