"""What the three wire formats share: the result types, the report of what a target could not
carry, the provider-field carrier, and the conversion of content part by part.

- `Parsed`, `Rendering` and the report entries are frozen, and a rendering is never changed once
  built: a later step (a cache breakpoint) returns a new one. No function here mutates an
  argument; results are new top-level objects that may share nested values with the input.
- Nothing is dropped silently: what a target cannot carry is recorded, against the index of the
  input item it came from, as an exclusion, a dropped field or a placeholder (`Losses`).

Provider fields (`ORIGIN_KEY`): an item read from Chat or Anthropic records
`{"format", "fields", "parts", "message"}`: the keys of its source block (`fields`), of its
content parts (`parts`, aligned by index) and of its source message (`message`, on the first
item of that message) that the Responses form does not model, such as Anthropic `is_error` and
`cache_control`. Reasoning always records its format: that is its provenance. Writing back to
the same format puts the fields back; writing to another format reports them as dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from app.domain.items import Format, Item, item_type

ORIGIN_KEY = "contextd.origin"
"""Item key holding what an item read from another format carries beyond the Responses form."""

REASONING_SEPARATOR = "\n\n"
"""Joins the summary parts of one reasoning item into the single text other formats hold."""

LOCAL_SHELL_TOOL = "local_shell"
"""Tool name a `local_shell_call` takes in formats without a local shell item."""

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


class Losses:
    """What one rendering could not carry, collected while that rendering is built and handed to
    its `Rendering` when it is complete; it is local to one call and never passed on."""

    def __init__(self) -> None:
        self.excluded: list[Excluded] = []
        self.dropped_fields: list[DroppedField] = []
        self.placeholders: list[Placeholder] = []

    def exclude(self, index: int, *, item: Item, reason: ExclusionReason) -> None:
        self.excluded.append(Excluded(index, item_type(item), reason))

    def drop_fields(self, index: int, paths: list[str]) -> None:
        self.dropped_fields.extend(DroppedField(index, path) for path in paths)

    def add_placeholders(self, index: int, kinds: list[PlaceholderKind]) -> None:
        self.placeholders.extend(Placeholder(index, kind) for kind in kinds)


def convert_content(content: Any, *, part: PartConverter, role: str) -> str | list[Item] | None:
    """Content kept as a string stays a string, so round trips are exact; None if any part fails."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [part(each, role) for each in content]
    if None in parts:
        return None
    return [each for each in parts if each is not None]


def placeholder_text(part: Any) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    return f"[{kind if isinstance(kind, str) else 'content'} part omitted: not supported here]"


def parts_or_placeholders(
    content: Any, *, part: PartConverter, role: str
) -> tuple[str | list[Item] | None, list[PlaceholderKind]]:
    """Content converted part by part, a part the target cannot carry becoming a placeholder
    text, and the placeholders written. None when the content is not a string or a list."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return None, []
    out: list[Item] = []
    kinds: list[PlaceholderKind] = []
    for each in content:
        converted = part(each, role)
        if converted is None:
            kinds.append("unsupported_part")
            converted = {"type": "text", "text": placeholder_text(each)}
        out.append(converted)
    return out, kinds


def dump_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def reasoning_text(item: Item) -> str | None:
    """The readable text of a reasoning item: its summary, else its raw content; None if neither."""
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list) and parts:
            texts = [each.get("text") if isinstance(each, dict) else None for each in parts]
            strings = [text for text in texts if isinstance(text, str)]
            return REASONING_SEPARATOR.join(strings) if len(strings) == len(texts) else None
    return None


def origin_of(item: Item) -> dict[str, Any]:
    origin = item.get(ORIGIN_KEY)
    return origin if isinstance(origin, dict) else {}


def without_origin(item: Item) -> Item:
    return {k: v for k, v in item.items() if k != ORIGIN_KEY} if ORIGIN_KEY in item else item


def with_origin(item: Item, *, fmt: Format, **residual: Any) -> Item:
    """`item` carrying the fields of its source it cannot model; reasoning always says where it
    came from."""
    kept = {key: value for key, value in residual.items() if value}
    if kept or item_type(item) == "reasoning":
        return {**item, ORIGIN_KEY: {"format": fmt, **kept}}
    return item


def unmodeled(element: dict[str, Any], modeled: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in element.items() if k not in modeled}


def part_extras(parts: list[Any], modeled: frozenset[str]) -> list[dict[str, Any]]:
    """Per-part unmodeled keys, aligned with `parts`; empty when no part has any."""
    extras = [unmodeled(p, modeled) if isinstance(p, dict) else {} for p in parts]
    return extras if any(extras) else []


def foreign_fields(origin: dict[str, Any]) -> list[str]:
    """The paths of the provider fields an origin holds, for reporting them dropped."""
    paths = [str(key) for key in origin.get("fields", {})]
    for index, extra in enumerate(origin.get("parts", [])):
        paths.extend(f"content[{index}].{key}" for key in extra)
    paths.extend(f"message.{key}" for key in origin.get("message", {}))
    return paths


def merged(base: Item, extra: Any) -> Item:
    """A copy of `base` with `extra`'s keys set. `extra` comes from an origin, which a client may
    have written, so it is taken as `dict.update` takes it rather than assumed to be a dict."""
    result = dict(base)
    result.update(extra)
    return result


def restored_parts(blocks: list[Item], origin: dict[str, Any]) -> list[Item] | None:
    """`blocks` with the parts' provider fields put back, when the parts still line up; None if
    they do not."""
    extras = origin.get("parts", [])
    if not extras:
        return blocks
    if len(extras) != len(blocks):
        return None
    return [merged(block, extra) for block, extra in zip(blocks, extras, strict=True)]
