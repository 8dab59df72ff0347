"""Facts: what the service writes to a session's log, and how the log is folded into the
session's active history.

A session's log holds client items (in Responses form) and the service's own facts, whose
types start with `contextd.`: goal versions, world-state snapshots (the full snapshot first, an
RFC 7386 merge patch after), compactions, retractions, resets and links to child sessions.
Invariants:

- Clients never write `contextd.*` facts (`client_items` refuses them); every builder of one
  marks it harness-authored.
- A fact's `tokens` is `count(visible_text(item))` in the session's encoding for model-visible
  items, the compacted history's tokens for a compaction, and 0 for bookkeeping.
- The fold is a pure function of the facts in seq order, and incremental: folding facts
  `a..c` onto the fold of `..a` equals folding `..c` from scratch. A fold is never mutated once
  built, so folds can be shared between requests.
- Internal facts never appear among the active history's items: goal versions, world-state
  facts and compactions are folded into `goal`, `world_state` and `compactions`; child links
  and other bookkeeping are skipped. A compaction replaces the visible items with its own
  `history`, whose entries name a kept fact by seq (verbatim) or carry an item it wrote.
- A fork starts from its parent's active history as of the fork point, without the parent's
  world-state fragments and with only the sections it declared inherited.

The package, one concern a module: `kinds` (each fact kind's type, how it is written, and what
recall reads back of it), `fold` (the log folded into the active history) and `retraction`
(which items a retraction hides, read from the active history). This module is their surface.
"""

from app.domain.facts.columns import LoggedUpTo
from app.domain.facts.fold import (
    EMPTY_FOLD,
    ActiveHistory,
    FactRecord,
    Fold,
    LoggedFact,
    fold_facts,
    fork_fold,
)
from app.domain.facts.kinds import (
    CHILD_FACT,
    COMPACTION_FACT,
    GOAL_FACT,
    RESET_FACT,
    RETRACTION_FACT,
    WORLD_STATE_FACT,
    ChildKind,
    NewFact,
    child_link_fact,
    client_batch,
    client_items,
    compaction_fact,
    conclusion_fact,
    conclusion_item,
    delegate_brief,
    fact_text,
    goal_fact,
    item_fact,
    reset_fact,
    world_state_facts,
)
from app.domain.facts.retraction import Retraction, plan_retraction

__all__ = [
    "CHILD_FACT",
    "COMPACTION_FACT",
    "EMPTY_FOLD",
    "GOAL_FACT",
    "RESET_FACT",
    "RETRACTION_FACT",
    "WORLD_STATE_FACT",
    "ActiveHistory",
    "ChildKind",
    "FactRecord",
    "Fold",
    "LoggedFact",
    "LoggedUpTo",
    "NewFact",
    "Retraction",
    "child_link_fact",
    "client_batch",
    "client_items",
    "compaction_fact",
    "conclusion_fact",
    "conclusion_item",
    "delegate_brief",
    "fact_text",
    "fold_facts",
    "fork_fold",
    "goal_fact",
    "item_fact",
    "plan_retraction",
    "reset_fact",
    "world_state_facts",
]
