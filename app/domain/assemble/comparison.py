"""Comparing two assemblies: what changed between their selections, and how much of the later
one's leading items a provider's prompt cache can reuse.

Invariants:

- Both work on positions and identities alone (ids for a diff, fingerprints for reuse), so the
  earlier assembly need only be kept as those pairs, not as its items.
- An id listed twice counts at its first position; a reused prefix ends at the first position
  whose fingerprint differs, or where either assembly ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Moved:
    id: str
    from_position: int
    to_position: int


@dataclass(frozen=True)
class AssemblyDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    moved: tuple[Moved, ...]
    tokens_delta: int


def diff_selections(
    old: Sequence[tuple[str, int]], new: Sequence[tuple[str, int]], *, tokens_delta: int
) -> AssemblyDiff:
    """What changed between two selections given as (id, position) pairs.

    `added` in new order, `removed` in old order, `moved` (an id kept at another position) in new
    order. An id listed twice counts at its first position.
    """
    old_positions: dict[str, int] = {}
    for item_id, position in old:
        old_positions.setdefault(item_id, position)
    new_positions: dict[str, int] = {}
    for item_id, position in new:
        new_positions.setdefault(item_id, position)
    return AssemblyDiff(
        added=tuple(item_id for item_id in new_positions if item_id not in old_positions),
        removed=tuple(item_id for item_id in old_positions if item_id not in new_positions),
        moved=tuple(
            Moved(id=item_id, from_position=old_positions[item_id], to_position=position)
            for item_id, position in new_positions.items()
            if item_id in old_positions and old_positions[item_id] != position
        ),
        tokens_delta=tokens_delta,
    )


@dataclass(frozen=True)
class ReusedPrefix:
    """The longest common leading run of two calls' items: what a provider's prompt cache can
    reuse. `items` is how many leading items it spans, which is also the position of the first
    item not reused (positions count from 0); `tokens` are counted with the current call's
    tokens."""

    items: int
    tokens: int


def reused_prefix(
    previous: Sequence[tuple[str, int]], current: Sequence[tuple[str, int]]
) -> ReusedPrefix:
    """The reused prefix of `current` after `previous`, both (fingerprint, tokens) pairs in
    position order: it ends at the first position whose fingerprint differs, or where either
    call ends."""
    items = tokens = 0
    for (before, _), (now, now_tokens) in zip(previous, current, strict=False):
        if before != now:
            break
        items += 1
        tokens += now_tokens
    return ReusedPrefix(items=items, tokens=tokens)
