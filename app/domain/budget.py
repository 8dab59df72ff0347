"""Assembly budgets: the limits of one call and the policy presets.

`Budget` fields are upper bounds, None meaning unlimited; `assemble` keeps every selection within
them except by required candidates (see its module docstring). The presets are part of the wire
contract (`policy`): changing one changes what every caller that names it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["POLICIES", "Budget", "Policy", "effective_budget"]


@dataclass(frozen=True)
class Budget:
    """Limits of one assembly; None means unlimited."""

    max_items: int | None = 12
    max_tokens: int | None = 4000
    max_items_per_source: int | None = 6
    max_tokens_per_source: int | None = 2500


Policy = Literal["balanced", "compact", "expansive"]
POLICIES: dict[Policy, Budget] = {
    "balanced": Budget(),
    "compact": Budget(
        max_items=8, max_tokens=2500, max_items_per_source=4, max_tokens_per_source=1200
    ),
    "expansive": Budget(
        max_items=20, max_tokens=8000, max_items_per_source=8, max_tokens_per_source=3500
    ),
}


def effective_budget(
    policy: Policy, *, session_window: int | None, explicit: Mapping[str, int | None] | None
) -> Budget:
    """The policy's preset, then the session's window as `max_tokens` (session mode without an
    explicit budget), then the explicit budget's given fields, field by field."""
    budget = POLICIES[policy]
    if session_window is not None and explicit is None:
        budget = replace(budget, max_tokens=session_window)
    if explicit is not None:
        budget = replace(budget, **{k: v for k, v in explicit.items() if v is not None})
    return budget
