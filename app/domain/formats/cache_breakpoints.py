"""Anthropic prompt-cache breakpoints: the blocks of a rendering that carry `cache_control`.

- A request never has more than `MAX_CACHE_BREAKPOINTS` blocks carrying `cache_control`: when
  it would, the earliest ones not asked to be kept lose it, each reported as a dropped field at
  index 0 (a breakpoint belongs to the request, not to one item).
- A breakpoint goes on the last cacheable block at or before where an input item landed;
  thinking blocks take none, so it moves back past them. A plain-string message that gets one
  becomes a single text block, the only form that can carry it.
- A rendering is never changed: each step returns a new one, copying only the blocks and
  messages it touches, so whoever holds a rendering can rely on it staying as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import replace
from typing import Any

from app.domain.formats.common import Block, DroppedField, Rendering
from app.domain.items import Item

MAX_CACHE_BREAKPOINTS = 4
"""Anthropic refuses a request with more blocks carrying `cache_control`."""

_CACHEABLE = frozenset({"text", "image", "tool_use", "tool_result"})
"""Block types that may carry `cache_control` (thinking blocks may not)."""

BlockKey = tuple[int | None, int | None]
"""A block position as `(message, block)`, as callers keep the breakpoints they placed."""


def place_cache_breakpoints(
    rendering: Rendering,
    item_ids: Sequence[str],
    *,
    stable_prefix: int,
    previous_call: int,
    history_end: int,
) -> tuple[Rendering, list[dict[str, Any]]]:
    """`rendering` with the service's breakpoints marked, and where they are: at the input
    items it names by position (-1: none), in request order, one per block.

    - `stable_prefix`: the end of the system content, which changes only with rules, tools or
      the goal;
    - `previous_call`: the last block the lineage's previous call shares (read from the cache);
    - `history_end`: the end of the history (written for the next call, whose history extends
      this one).

    Breakpoints a client sent stay while the request has room for them.
    """
    targets = {
        "stable_prefix": stable_prefix,
        "previous_call": previous_call,
        "history_end": history_end,
    }
    placed: list[dict[str, Any]] = []
    marked: set[BlockKey] = set()
    for reason, position in sorted(targets.items(), key=lambda target: target[1]):
        if position < 0:
            continue
        rendering, block = mark_cache_breakpoint(rendering, position)
        if block is None or (block.message, block.block) in marked:
            continue
        marked.add((block.message, block.block))
        placed.append(
            {
                "reason": reason,
                "position": position,
                "item_id": item_ids[position],
                "message": block.message,
                "block": block.block,
            }
        )
    return cap_cache_breakpoints(rendering, keep=marked), placed


def mark_cache_breakpoint(rendering: Rendering, index: int) -> tuple[Rendering, Block | None]:
    """`rendering` with an ephemeral `cache_control` on the last cacheable block at or before
    where input item `index` landed, and the block marked; `rendering` itself and None when
    there is none."""
    location = next(
        (loc for loc in reversed(rendering.locations[: index + 1]) if loc is not None), None
    )
    if location is None:
        return rendering, None
    for where in _blocks_backwards(rendering, location):
        if _block_at(rendering, where).get("type") in _CACHEABLE:
            marked = _with_block(
                rendering, at=where, edit=lambda b: {**b, "cache_control": {"type": "ephemeral"}}
            )
            return marked, where
    return rendering, None


def cap_cache_breakpoints(rendering: Rendering, *, keep: Set[BlockKey]) -> Rendering:
    """`rendering` without the earliest breakpoints not in `keep` (the service's own) beyond
    `MAX_CACHE_BREAKPOINTS`, each removal reported as a dropped field."""
    marked = _cache_control_positions(rendering)
    removable = [where for where in marked if (where.message, where.block) not in keep]
    removed = removable[: max(0, len(marked) - MAX_CACHE_BREAKPOINTS)]
    for where in removed:
        rendering = _with_block(
            rendering,
            at=where,
            edit=lambda b: {k: v for k, v in b.items() if k != "cache_control"},
        )
    dropped = [DroppedField(0, "cache_control") for _ in removed]
    return replace(rendering, dropped_fields=[*rendering.dropped_fields, *dropped])


def _blocks_of(message: Item) -> list[Item]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _cache_control_positions(rendering: Rendering) -> list[Block]:
    """Every block of a request that carries `cache_control`, in request order."""
    system = rendering.system or []
    positions = [Block(None, b) for b, block in enumerate(system) if "cache_control" in block]
    for m, message in enumerate(rendering.items):
        if isinstance(message["content"], list):
            positions.extend(
                Block(m, b)
                for b, block in enumerate(message["content"])
                if "cache_control" in block
            )
    return positions


def _blocks_backwards(rendering: Rendering, start: Block) -> Iterator[Block]:
    """Block positions from `start` back to the first system block, in reverse request order; a
    plain-string message counts as its one text block."""
    if start.message is not None:
        for m in range(start.message, -1, -1):
            count = len(_blocks_of(rendering.items[m]))
            top = start.block if m == start.message and start.block is not None else None
            last = count - 1 if top is None else top
            yield from (Block(m, b) for b in range(last, -1, -1))
        top_system = len(rendering.system or []) - 1
    else:
        top_system = start.block if start.block is not None else -1
    yield from (Block(None, b) for b in range(top_system, -1, -1))


def _block_at(rendering: Rendering, where: Block) -> Item:
    assert where.block is not None
    if where.message is None:
        return (rendering.system or [])[where.block]
    return _blocks_of(rendering.items[where.message])[where.block]


def _with_block(rendering: Rendering, *, at: Block, edit: Callable[[Item], Item]) -> Rendering:
    """`rendering` with the block `at` replaced by `edit` of it; the lists and the message on
    the way are copies, everything else is shared."""
    assert at.block is not None
    if at.message is None:
        system = rendering.system or []
        return replace(
            rendering, system=[edit(b) if n == at.block else b for n, b in enumerate(system)]
        )
    message = rendering.items[at.message]
    blocks = [edit(b) if n == at.block else b for n, b in enumerate(_blocks_of(message))]
    items = [
        {**message, "content": blocks} if m == at.message else each
        for m, each in enumerate(rendering.items)
    ]
    return replace(rendering, items=items)
