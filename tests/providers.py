"""Judges of provider-ready output: the providers' own SDK request types, made strict, plus the
provider rules those types cannot express.

Every function returns a list of human-readable violations; an empty list means the provider
would accept the payload as far as anyone can tell without calling it.

Strictness: pydantic ignores unknown keys in a TypedDict unless its config forbids them, and the
SDKs do not. Before the first adapter is built, every TypedDict defined under `anthropic.types`
and `openai.types` is given a config that forbids extra keys, so an unknown key is refused at
any depth. This changes those classes for the whole test process; nothing in the service uses
them. Two more holes are closed by hand: `Iterable[...]` fields validate lazily (their errors
only surface when iterated, so every validated value is materialised), and some unions also
admit the SDKs' response models, which keep unknown keys in `model_extra` instead of refusing
them (so a model holding extras counts as a rejection).

The deliberate loosenings, both the shapes the Codex CLI itself sends and the Responses API
takes: an assistant message of `output_text` parts holding only `type` and `text` (no `id`,
`status` or `annotations`), and a reasoning item of a `summary_text` summary and encrypted
content without an `id` (stateless use). Everything else must pass `ResponseInputParam`
strictly.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import pkgutil
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

import anthropic.types
import openai.types
from anthropic.types import MessageParam, TextBlockParam, ToolParam
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
from openai.types.responses import FunctionToolParam, ResponseInputParam
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import is_typeddict

MAX_CACHE_BREAKPOINTS = 4
"""Anthropic accepts at most four blocks carrying `cache_control` in one request."""

_STRICT = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

_TYPE_MISMATCHES = frozenset(
    {
        "string_type",
        "iterable_type",
        "list_type",
        "dict_type",
        "model_type",
        "model_attributes_type",
        "is_instance_of",
        "none_required",
    }
)
"""Errors that only say "this union branch wants another kind of value": noise when another
branch explains the real problem."""

_RESPONSES_PART_TYPES = frozenset({"input_text", "output_text", "input_image", "input_file"})
_CHAT_PART_TYPES = frozenset({"image_url", "input_audio", "file"})
_ANTHROPIC_BLOCK_TYPES = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)

_CALL_FAMILY = {
    "function_call": "function_call_output",
    "local_shell_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
"""Responses calls and the output type that answers each (a local shell call is answered the
way the Codex CLI answers it)."""


@dataclass(frozen=True)
class _Adapters:
    anthropic_messages: TypeAdapter[list[MessageParam]]
    anthropic_system: TypeAdapter[list[TextBlockParam]]
    chat_messages: TypeAdapter[list[ChatCompletionMessageParam]]
    responses_items: TypeAdapter[ResponseInputParam]
    tools: dict[str, TypeAdapter[list[Any]]]


def _forbid_unknown_keys(package: ModuleType) -> None:
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and is_typeddict(value)
                and value.__module__.startswith(f"{package.__name__}.")
            ):
                cast(Any, value).__pydantic_config__ = _STRICT


@functools.cache
def _adapters() -> _Adapters:
    # The walk imports a few thousand modules: done once per test process.
    _forbid_unknown_keys(anthropic.types)
    _forbid_unknown_keys(openai.types)
    return _Adapters(
        anthropic_messages=TypeAdapter(list[MessageParam]),
        anthropic_system=TypeAdapter(list[TextBlockParam]),
        chat_messages=TypeAdapter(list[ChatCompletionMessageParam]),
        responses_items=TypeAdapter(ResponseInputParam),
        tools={
            "anthropic": TypeAdapter(list[ToolParam]),
            "chat": TypeAdapter(list[ChatCompletionFunctionToolParam]),
            "responses": TypeAdapter(list[FunctionToolParam]),
        },
    )


# --- SDK validation -----------------------------------------------------------------------


def _is_branch(tag: str | int) -> bool:
    """A union branch in an error location: a class name (fields are snake_case)."""
    return isinstance(tag, str) and tag[:1].isupper()


def _shown(tag: str | int) -> bool:
    """Location tags worth printing: fields, indices and branch classes, not wrapper names."""
    return isinstance(tag, int) or ("[" not in tag and tag != "str")


def _describe_errors(errors: Sequence[ErrorDetails], *, where: str) -> list[str]:
    """The few errors that explain a refusal, without the union noise: branches whose `type`
    or `role` did not match are set aside, and so are mere type mismatches when anything else
    remains."""
    discriminators = [
        error
        for error in errors
        if error["type"] == "literal_error"
        and len(error["loc"]) >= 2
        and error["loc"][-1] in ("type", "role")
        and _is_branch(error["loc"][-2])
    ]
    rejected = {tuple(error["loc"][:-1]) for error in discriminators}
    relevant = [
        error
        for error in errors
        if not any(tuple(error["loc"][:n]) in rejected for n in range(1, len(error["loc"]) + 1))
    ]
    if not relevant:
        given = sorted({f"{e['loc'][-1]}={e['input']!r}" for e in discriminators})
        return [f"{where}: no SDK variant takes {', '.join(given)}"]
    explained = [e for e in relevant if e["type"] not in _TYPE_MISMATCHES] or relevant
    lines = list(
        dict.fromkeys(
            f"{'.'.join(str(tag) for tag in error['loc'] if _shown(tag))}: {error['msg']}"
            for error in explained
        )
    )
    more = f" (+{len(lines) - 3} more)" if len(lines) > 3 else ""
    return [f"{where}: {'; '.join(lines[:3])}{more}"]


def _without_first_tag(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Errors located relative to one element rather than the list (or iterator) holding it."""
    return [cast(ErrorDetails, {**error, "loc": error["loc"][1:]}) for error in errors]


def _materialise(value: Any, *, where: str, found: list[str]) -> None:
    """Walks a validated value: iterates lazy `Iterable` fields so their errors surface, and
    refuses SDK response models that kept unknown keys."""
    if isinstance(value, BaseModel):
        if value.model_extra:
            name = type(value).__name__
            found.append(f"{where}: unknown keys {sorted(value.model_extra)} (only {name} took it)")
        for field in type(value).model_fields:
            _materialise(getattr(value, field), where=f"{where}.{field}", found=found)
    elif isinstance(value, dict):
        for key, nested in value.items():
            _materialise(nested, where=f"{where}.{key}", found=found)
    elif isinstance(value, list | tuple):
        for index, nested in enumerate(value):
            _materialise(nested, where=f"{where}[{index}]", found=found)
    elif isinstance(value, Iterator):
        index = 0
        while True:
            try:
                nested = next(value)
            except StopIteration:
                break
            except ValidationError as error:
                errors = _without_first_tag(error.errors(include_url=False))
                found += _describe_errors(errors, where=f"{where}[{index}]")
            else:
                _materialise(nested, where=f"{where}[{index}]", found=found)
            index += 1


def _sdk_violations(adapter: TypeAdapter[Any], value: Any, *, where: str) -> list[str]:
    """Strict validation of one element (`value` is validated as a one-element list)."""
    found: list[str] = []
    try:
        validated = adapter.validate_python([value])
    except ValidationError as error:
        errors = _without_first_tag(error.errors(include_url=False))
        return _describe_errors(errors, where=where)
    _materialise(validated[0], where=where, found=found)
    return found


# --- shapes -------------------------------------------------------------------------------


def _part_types(content: Any) -> set[str]:
    if not isinstance(content, list):
        return set()
    return {p["type"] for p in content if isinstance(p, dict) and isinstance(p.get("type"), str)}


def _foreign_shape(element: Any, target: str) -> str | None:
    """What other wire format `element` is in, if it is plainly not `target`'s."""
    if not isinstance(element, dict):
        return f"not a JSON object ({type(element).__name__})"
    parts = _part_types(element.get("content"))
    if target in ("chat", "anthropic") and "type" in element:
        return f"a Responses item (type {element['type']!r})"
    if target == "anthropic":
        if element.get("role") in ("system", "developer", "tool") or (
            {"tool_calls", "tool_call_id"} & element.keys()
        ):
            return f"a Chat message (role {element.get('role')!r})"
        if foreign := parts & (_RESPONSES_PART_TYPES | _CHAT_PART_TYPES | {"refusal"}):
            return f"a message with Responses/Chat parts {sorted(foreign)}"
    if target == "chat":
        if foreign := parts & _ANTHROPIC_BLOCK_TYPES:
            return f"an Anthropic message (blocks {sorted(foreign)})"
        if foreign := parts & _RESPONSES_PART_TYPES:
            return f"a message with Responses parts {sorted(foreign)}"
    if target == "responses" and "type" not in element:
        if element.get("role") == "tool" or "tool_calls" in element:
            return f"a Chat message (role {element.get('role')!r})"
        if foreign := parts & (_ANTHROPIC_BLOCK_TYPES | _CHAT_PART_TYPES | {"text"}):
            return f"a Chat/Anthropic message (parts {sorted(foreign)})"
    return None


def _element_violations(
    element: Any, *, target: str, where: str, adapter: TypeAdapter[Any]
) -> list[str]:
    if (shape := _foreign_shape(element, target)) is not None:
        return [f"{where}: holds {shape}, not {target} output"]
    return _sdk_violations(adapter, element, where=where)


# --- Anthropic Messages -------------------------------------------------------------------


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _is_blank(text: Any) -> bool:
    return isinstance(text, str) and not text.strip()


def _empty_text_blocks(value: Any, *, where: str) -> Iterator[str]:
    """Text blocks with no visible text, at any depth (tool results hold blocks too)."""
    if isinstance(value, dict):
        if value.get("type") == "text" and _is_blank(value.get("text")):
            yield f"{where}: text block is empty or whitespace only ({value.get('text')!r})"
        for key in ("content", "source"):
            yield from _empty_text_blocks(value.get(key), where=f"{where}.{key}")
    elif isinstance(value, list):
        for index, nested in enumerate(value):
            yield from _empty_text_blocks(nested, where=f"{where}[{index}]")


def _cache_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") is not None else 0
        return own + sum(_cache_breakpoints(nested) for nested in value.values())
    if isinstance(value, list):
        return sum(_cache_breakpoints(nested) for nested in value)
    return 0


def _anthropic_rules(system: Any, messages: Sequence[Any]) -> Iterator[str]:
    if system is not None and not isinstance(system, list):
        yield f"system: must be a list of text blocks, got {type(system).__name__}"
    yield from _empty_text_blocks(system, where="system")
    dicts = [(i, m) for i, m in enumerate(messages) if isinstance(m, dict)]
    if dicts and dicts[0][1].get("role") != "user":
        yield f"messages[{dicts[0][0]}]: the first message must be a user message"
    for (_, before), (index, message) in itertools.pairwise(dicts):
        if message.get("role") == before.get("role"):
            yield f"messages[{index}]: second {message.get('role')} message in a row"
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            yield f"{where}: role {role!r} (Anthropic messages are user or assistant)"
        if content in ("", []) or _is_blank(content):
            yield f"{where}: empty content"
        yield from _empty_text_blocks(content, where=f"{where}.content")
        kinds = [block.get("type") for block in _blocks(message)]
        if role == "user" and "tool_use" in kinds:
            yield f"{where}: tool_use in a user message"
        if role == "assistant" and "tool_result" in kinds:
            yield f"{where}: tool_result in an assistant message"
        if role == "user" and {"thinking", "redacted_thinking"} & set(kinds):
            yield f"{where}: thinking in a user message"
        first_other = next((n for n, kind in enumerate(kinds) if kind != "tool_result"), None)
        if first_other is not None and "tool_result" in kinds[first_other:]:
            yield f"{where}: tool_result blocks must come before every other block"
    yield from _anthropic_tool_pairing(messages)
    total = _cache_breakpoints(system) + _cache_breakpoints(list(messages))
    if total > MAX_CACHE_BREAKPOINTS:
        yield f"{total} blocks carry cache_control (at most {MAX_CACHE_BREAKPOINTS})"


def _anthropic_tool_pairing(messages: Sequence[Any]) -> Iterator[str]:
    """Each tool_use is answered in the very next message, a user message, by one tool_result;
    each tool_result answers a tool_use of the message just before it."""
    asked: list[str] = []
    for index, message in enumerate([*messages, None]):
        where = f"messages[{index}]"
        blocks = _blocks(message)
        answered = Counter(
            str(block.get("tool_use_id")) for block in blocks if block.get("type") == "tool_result"
        )
        if asked and (not isinstance(message, dict) or message.get("role") != "user"):
            yield f"messages[{index - 1}]: tool_use {asked} not followed by a user message"
        else:
            missing = [call for call in asked if call not in answered]
            if missing:
                yield f"messages[{index - 1}]: tool_use {missing} unanswered in the next message"
        for call, count in answered.items():
            if call not in asked:
                yield f"{where}: tool_result for {call!r} answers no tool_use of the message before"
            elif count > 1:
                yield f"{where}: {count} tool_result blocks for {call!r}"
        asked = [str(block.get("id")) for block in blocks if block.get("type") == "tool_use"]


def anthropic_violations(system: Any, messages: Sequence[Any]) -> list[str]:
    """Why Anthropic Messages would refuse `system` + `messages` (empty: accepted)."""
    adapters = _adapters()
    found: list[str] = []
    if isinstance(system, list):
        for index, block in enumerate(system):
            found.extend(
                _sdk_violations(adapters.anthropic_system, block, where=f"system[{index}]")
            )
    for index, message in enumerate(messages):
        found += _element_violations(
            message,
            target="anthropic",
            where=f"messages[{index}]",
            adapter=adapters.anthropic_messages,
        )
    return found + list(_anthropic_rules(system, messages))


# --- Chat Completions ---------------------------------------------------------------------


def _chat_rules(messages: Sequence[Any]) -> Iterator[str]:
    asked: list[str] = []  # calls of the last assistant message, while its tool replies run
    answered: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if "reasoning_content" in message:
            yield f"{where}: `reasoning_content` is not an OpenAI Chat field"
        if role == "tool":
            call = str(message.get("tool_call_id"))
            if call in asked:
                asked.remove(call)
                answered.add(call)
            elif call in answered:
                yield f"{where}: second tool message for {call!r}"
            else:
                yield f"{where}: tool message for {call!r} does not directly follow its call"
            if message.get("content") in ("", []):
                yield f"{where}: tool message with empty content"
            continue
        if asked:
            yield f"{where}: tool_calls {asked} unanswered before this message (role {role!r})"
        asked, answered = [], set()
        if role == "assistant":
            tool_calls = message.get("tool_calls")
            if tool_calls == []:
                yield f"{where}: empty tool_calls list"
            content = message.get("content")
            if content in (None, "", []) and not tool_calls:
                yield f"{where}: assistant message with neither content nor tool_calls"
            if isinstance(tool_calls, list):
                asked = [str(c.get("id")) for c in tool_calls if isinstance(c, dict)]
                repeated = [call for call, n in Counter(asked).items() if n > 1]
                if repeated:
                    yield f"{where}: tool_call ids {repeated} repeated"
    if asked:
        yield f"end of messages: tool_calls {asked} never answered"


def chat_violations(messages: Sequence[Any]) -> list[str]:
    """Why Chat Completions would refuse `messages` (empty: accepted)."""
    adapter = _adapters().chat_messages
    found: list[str] = []
    for index, message in enumerate(messages):
        found += _element_violations(
            message, target="chat", where=f"messages[{index}]", adapter=adapter
        )
    return found + list(_chat_rules(messages))


# --- Responses ----------------------------------------------------------------------------


def _is_codex_assistant_message(item: Any) -> bool:
    """Exactly the assistant message shape the Codex CLI sends, and nothing looser."""
    if not isinstance(item, dict) or item.keys() != {"type", "role", "content"}:
        return False
    content = item["content"]
    return (
        item["type"] == "message"
        and item["role"] == "assistant"
        and isinstance(content, list)
        and bool(content)
        and all(
            isinstance(part, dict)
            and part.keys() == {"type", "text"}
            and part["type"] == "output_text"
            and isinstance(part["text"], str)
            for part in content
        )
    )


def _is_codex_reasoning(item: Any) -> bool:
    """Exactly the reasoning item the Codex CLI sends back (stateless, so without the `id` the
    SDK type asks for): a summary of `summary_text` parts and the encrypted content."""
    if not isinstance(item, dict) or item.keys() != {"type", "summary", "encrypted_content"}:
        return False
    summary = item["summary"]
    return (
        item["type"] == "reasoning"
        and isinstance(item["encrypted_content"], str)
        and isinstance(summary, list)
        and all(
            isinstance(part, dict)
            and part.keys() == {"type", "text"}
            and part["type"] == "summary_text"
            and isinstance(part["text"], str)
            for part in summary
        )
    )


def _responses_rules(items: Sequence[Any]) -> Iterator[str]:
    calls: dict[str, tuple[str, int]] = {}  # call_id -> (output type that answers it, index)
    answers: Counter[str] = Counter()
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, dict):
            continue
        kind, call_id = item.get("type"), item.get("call_id")
        if kind == "reasoning" and not item.get("id") and not _is_codex_reasoning(item):
            yield f"{where}: reasoning item without an id"
        if kind in _CALL_FAMILY:
            if call_id in calls:
                yield f"{where}: call_id {call_id!r} used by two calls"
            calls[str(call_id)] = (_CALL_FAMILY[str(kind)], index)
        elif kind in _CALL_FAMILY.values():
            family = calls.get(str(call_id))
            if family is None:
                yield f"{where}: {kind} for {call_id!r} has no call before it"
            elif family[0] != kind:
                yield f"{where}: {kind} answers {call_id!r}, a call of another family"
            else:
                answers[str(call_id)] += 1
                if answers[str(call_id)] == 2:
                    yield f"{where}: second output for {call_id!r}"
    for call_id, (output, index) in calls.items():
        if not answers[call_id]:
            yield f"items[{index}]: call {call_id!r} has no {output} after it"


def responses_violations(items: Sequence[Any]) -> list[str]:
    """Why the Responses API would refuse `items` as input (empty: accepted)."""
    adapter = _adapters().responses_items
    found: list[str] = []
    for index, item in enumerate(items):
        if not (_is_codex_assistant_message(item) or _is_codex_reasoning(item)):
            found += _element_violations(
                item, target="responses", where=f"items[{index}]", adapter=adapter
            )
    return found + list(_responses_rules(items))


def tool_violations(fmt: str, tools: Sequence[Any]) -> list[str]:
    """How `tools` fails the SDK's request type for a custom (function) tool of `fmt`: Anthropic
    `ToolParam`, Chat `ChatCompletionFunctionToolParam`, Responses `FunctionToolParam`."""
    adapter = _adapters().tools[fmt]
    return [
        violation
        for index, tool in enumerate(tools)
        for violation in _sdk_violations(adapter, tool, where=f"tools[{index}]")
    ]
