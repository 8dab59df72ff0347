"""Context assembly: choose which candidates and how much history a model sees, and in what order.

`assemble` is a pure function of its input and the token counter. Invariants of its result:

- Every candidate and every history entry appears in `plan` exactly once, in input order
  (contributions in request order, then history), either selected (with the form used and the
  position of its first occurrence) or dropped with exactly one reason. The history entries
  dropped are planned as runs of one reason each (`history:<first>-<last>`, their tokens
  summed; a run of one as its entry), so a plan is as long as what it shows, not the history.
- Only the last contribution of each source counts; every candidate of an earlier one is dropped.
- No two selected candidates share an identity (`locator`, else `id`).
- Selected tokens never exceed `max_tokens`, and selected candidates never exceed `max_items`,
  except by required candidates, which are always selected; `over_budget` says when they did.
  A group's selected tokens and items likewise stay within the per-source quotas except by
  required candidates (required candidates bypass every check but are accounted everywhere).
- A candidate restated at the end (placement `edges`) is charged for both of its copies (the
  copy at the end is its `restatement` when it has one, else the same again), so
  `total_tokens` is the sum of the tokens of `items`.
- Selected history is a contiguous suffix of the given history that starts at one of its
  `history_cuts` (no call loses its output, no reasoning item is parted from the item it led
  to), so a history that passes `find_pairing_violations` still passes it after selection.
  With `history_cut_step`, a history that does not fit starts at a stable point
  (see `app.domain.assemble.history_fit`); what fitted but lies before it is dropped as
  `history_cut`.
- The same input gives the same plan and `plan_hash`; the `prefix` layer is ordered by
  (source, id) only (candidates of `history_lead_source` last), so its bytes do not change
  when other layers change. Under `edges` the history follows the prefix directly and the
  other layers follow the history, so a change to them never moves the history's bytes.

The package, one concern a module: `model` (the vocabulary, the input and the plan),
`selection` (ranking and the walk of the candidates under the budget), `history_fit` (the
history's suffix), `placement` (the order, the plan, and `assemble` running the three:
`decide`, `arrange`, then `place`), `comparison` (two assemblies' diff and reused
prefix) and `cache_break` (why a reused prefix broke). This module is their surface.
"""

from app.domain.assemble.cache_break import (
    BREAK_CAUSES,
    BreakCause,
    BreakItem,
    PrefixBreak,
    PrefixState,
    explain_break,
    frames_match,
)
from app.domain.assemble.comparison import (
    AssemblyDiff,
    Moved,
    ReusedPrefix,
    diff_selections,
    reused_prefix,
)
from app.domain.assemble.history_fit import HistoryFit, atomic_groups
from app.domain.assemble.model import (
    CANDIDATE_DEFAULTS,
    HISTORY_SOURCE,
    LAYERS,
    TRUNCATED_FORM,
    AssemblyInput,
    AssemblyPlan,
    Candidate,
    Contribution,
    Decision,
    DropReason,
    FallbackForm,
    Layer,
    Placement,
    PlanEntry,
    RawForm,
    SelectedItem,
    ranking_score,
)
from app.domain.assemble.placement import Arranged, Decided, arrange, assemble, decide, place

__all__ = [
    "BREAK_CAUSES",
    "CANDIDATE_DEFAULTS",
    "HISTORY_SOURCE",
    "LAYERS",
    "TRUNCATED_FORM",
    "Arranged",
    "AssemblyDiff",
    "AssemblyInput",
    "AssemblyPlan",
    "BreakCause",
    "BreakItem",
    "Candidate",
    "Contribution",
    "Decided",
    "Decision",
    "DropReason",
    "FallbackForm",
    "HistoryFit",
    "Layer",
    "Moved",
    "Placement",
    "PlanEntry",
    "PrefixBreak",
    "PrefixState",
    "RawForm",
    "ReusedPrefix",
    "SelectedItem",
    "arrange",
    "assemble",
    "atomic_groups",
    "decide",
    "diff_selections",
    "explain_break",
    "frames_match",
    "place",
    "ranking_score",
    "reused_prefix",
]
