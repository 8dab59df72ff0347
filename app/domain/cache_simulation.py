"""A provider's prompt cache, simulated: what a call's prompt would find cached, and what it
costs in the provider's terms. The evaluation of a session's settings (`app.usecases.evaluate`)
and the replay benchmark serve every call they make through one.

The simulated provider keeps each prompt it served, by message, for its TTL after its last use.
A call reads the longest run of leading messages it shares with a live entry, counted only from
the provider's minimum prefix and in whole blocks; everything else it sends is written into the
cache (at the write price, when the prompt reaches the minimum). Tokens are the service's own
count of each item (`items[].tokens`, the session's encoding). Deterministic: a pure function
of the calls, their sizes and their times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.domain.prompt_cache import CacheTerms

__all__ = ["KEPT_ENTRIES", "Served", "SimulatedProvider", "shared_messages"]

KEPT_ENTRIES = 8
"""The newest prompts the simulated provider matches against (older ones are the same prompts'
prefixes, or expired)."""


@dataclass(frozen=True)
class Served:
    """One call as the simulated provider served it, in the session's tokens."""

    input: int
    cached: int
    written: int
    expired: bool
    """Whether a live entry would have served more, had the prompt that wrote it not expired."""

    def cost(self, terms: CacheTerms) -> float:
        """In fresh input tokens: uncached input at 1, cached at the read price, and the write
        premium on what is written."""
        fresh = self.input - self.cached
        return fresh + terms.read_price * self.cached + (terms.write_price - 1) * self.written


@dataclass
class _Entry:
    messages: list[bytes]
    ends: list[int]
    """Cumulative tokens after each message."""
    used_at: float


@dataclass
class SimulatedProvider:
    """The prompts a provider keeps cached, under `terms`."""

    terms: CacheTerms
    entries: list[_Entry] = field(default_factory=list)

    def call(self, messages: Sequence[Any], sizes: Sequence[int], *, at: float) -> Served:
        """Serves one prompt (`messages`, each of `sizes` tokens) sent at `at` seconds."""
        encoded = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        ends: list[int] = []
        for size in sizes:
            ends.append((ends[-1] if ends else 0) + size)
        total = ends[-1] if ends else 0
        live = [e for e in self.entries if at - e.used_at <= self.terms.ttl_seconds]
        best, best_entry, lost = 0, None, 0
        for entry in self.entries:
            shared = shared_messages(entry.messages, encoded)
            tokens = ends[shared - 1] if shared else 0
            if any(entry is e for e in live):
                if tokens > best:
                    best, best_entry = tokens, entry
            else:
                lost = max(lost, tokens)
        cached = self._counted(best)
        if best_entry is not None:
            best_entry.used_at = at
        written = total - cached if total >= self.terms.minimum_prefix else 0
        self.entries = [*live, _Entry(encoded, ends, at)][-KEPT_ENTRIES:]
        return Served(
            input=total, cached=cached, written=written, expired=self._counted(lost) > cached
        )

    def _counted(self, tokens: int) -> int:
        if tokens < self.terms.minimum_prefix:
            return 0
        return tokens - tokens % self.terms.block


def shared_messages(before: Sequence[bytes], now: Sequence[bytes]) -> int:
    """How many leading messages two prompts (each message's canonical JSON) share."""
    shared = 0
    for a, b in zip(before, now, strict=False):
        if a != b:
            break
        shared += 1
    return shared
