"""Assembly budgets: the limits of one call and the policy presets.

`Budget` fields are upper bounds, None meaning unlimited; `assemble` keeps every selection within
them except by required candidates (see its module docstring). The presets are part of the wire
contract (`policy`): changing one changes what every caller that names it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["HISTORY_CUT_STEP", "POLICIES", "Budget", "Policy", "effective_budget", "usable_window"]


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


def usable_window(context_window: int, *, output_reserve: int) -> int:
    """The tokens a session-mode call may fill: the model's window less the output reserve.

    The one window of a session: assembly fits it, and advice and every pressure figure are
    measured against it. The reserve never takes more than half the window, so a small model's
    window is not reserved away entirely by a default sized for large ones.
    """
    return max(1, context_window - min(output_reserve, context_window // 2))


HISTORY_CUT_STEP = 0.5
"""Share of the usable window between two stable cut points of a session's history: when the
history no longer fits, a cut drops at least this much, so that the calls after it share their
prefix until the history has grown as much again."""
