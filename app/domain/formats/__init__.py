"""Conversion between canonical Responses items and the Chat Completions and Anthropic wire formats.

Reading (`to_responses`) keeps everything: an element the service cannot parse is copied
unchanged into the Responses-form list (it stays in the log, excluded from model-visible
history) and its index listed in `Parsed.untranslated`. What a format carries that Responses
does not model rides along on the item under `ORIGIN_KEY` (see `common`), so nothing sent is lost.

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

Each wire format has one module holding both directions of its mapping (`responses`, `chat`,
`anthropic`), so a format is read, changed or added in one place; `cache_breakpoints` places
Anthropic `cache_control`, and `common` holds what the formats share. This module is the surface
the rest of the service imports from.
"""

from __future__ import annotations

from typing import assert_never

from app.domain.formats.anthropic import (
    RAW_ARGUMENTS,
    RAW_INPUT,
    read_anthropic,
    render_anthropic,
)
from app.domain.formats.cache_breakpoints import (
    cap_cache_breakpoints,
    mark_cache_breakpoint,
    place_cache_breakpoints,
)
from app.domain.formats.chat import EMPTY_OUTPUT_TEXT, read_chat, render_chat
from app.domain.formats.common import (
    ORIGIN_KEY,
    Block,
    DroppedField,
    Excluded,
    Parsed,
    Placeholder,
    PlaceholderKind,
    Rendering,
)
from app.domain.formats.responses import read_responses, render_responses
from app.domain.items import Format, Item

__all__ = [
    "EMPTY_OUTPUT_TEXT",
    "ORIGIN_KEY",
    "RAW_ARGUMENTS",
    "RAW_INPUT",
    "Block",
    "DroppedField",
    "Excluded",
    "Parsed",
    "Placeholder",
    "PlaceholderKind",
    "Rendering",
    "cap_cache_breakpoints",
    "from_responses",
    "mark_cache_breakpoint",
    "place_cache_breakpoints",
    "to_responses",
]


def to_responses(items: list[Item], fmt: Format) -> Parsed:
    """Read a history in wire format `fmt` into canonical Responses items."""
    match fmt:
        case "responses":
            return read_responses(items)
        case "chat":
            return read_chat(items)
        case "anthropic":
            return read_anthropic(items)
        case _:
            assert_never(fmt)


def from_responses(items: list[Item], fmt: Format) -> Rendering:
    """Write canonical Responses items in wire format `fmt`."""
    match fmt:
        case "responses":
            return render_responses(items)
        case "chat":
            return render_chat(items)
        case "anthropic":
            return render_anthropic(items)
        case _:
            assert_never(fmt)
