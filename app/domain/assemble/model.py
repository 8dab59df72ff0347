"""The vocabulary of assembly: layers, placements, forms and drop reasons; what goes in
(`Candidate`, `Contribution`, `AssemblyInput`) and what comes out (`SelectedItem`, `PlanEntry`,
`AssemblyPlan`).

Invariants:

- A candidate offers a text (`content`) or a Responses item (`item`), never both and never
  neither; `assemble` refuses any other.
- Every value here is immutable once built: inputs are shared with the caller, and a plan is
  stored and answered as it is.
- `SelectedItem.fingerprint` and `AssemblyPlan.plan_hash` hash the canonical JSON (sorted keys)
  of what the model sees, so equal bytes give equal hashes in any process.
- `ranking_score` is the one place a candidate's scores are weighed against each other; the
  walk ranks by it (see `app.domain.assemble.selection`).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypedDict, get_args

from app.domain.budget import POLICIES, Budget
from app.domain.history import HistoryEntry
from app.domain.items import Item, visible_text
from app.domain.json_encoding import encode_json

Layer = Literal["prefix", "task", "recent", "memory", "retrieval"]
LAYERS: tuple[Layer, ...] = ("prefix", "task", "recent", "memory", "retrieval")
Placement = Literal["edges", "input_order"]
DropReason = Literal[
    "superseded_contribution",
    "duplicate",
    "near_duplicate",
    "below_relevance",
    "recall_cap",
    "max_items",
    "max_tokens",
    "source_max_items",
    "source_max_tokens",
    "unattributed",
    "history_cut",
]

BUDGET_REASONS: frozenset[DropReason] = frozenset(
    {
        "recall_cap",
        "max_items",
        "max_tokens",
        "source_max_items",
        "source_max_tokens",
        "history_cut",
    }
)
"""The drops that make an assembly `truncated`: what the budget left out. A candidate dropped as
irrelevant, a duplicate, superseded or unattributed was not wanted whatever the budget."""

Decision = Literal["selected", "dropped"]
RawForm = Literal["raw"]
FallbackForm = Literal["skeleton", "reference"]
RAW_FORM = "raw"
TRUNCATED_FORM = "truncated"
"""A history item shown truncated to fit (`AssemblyInput.keep_newest`)."""
FALLBACK_FORMS: tuple[FallbackForm, ...] = get_args(FallbackForm)
"""Cheaper forms tried, in this order, when the raw form does not fit."""
HISTORY_SOURCE = "history"
RESTATED_SUFFIX = "#restated"

NO_FORMS: Mapping[str, str] = MappingProxyType({})


class Candidate(NamedTuple):
    """One thing a source offers: a text (`content`) or a Responses item (`item`), never both
    (`assemble` refuses a candidate with neither or both).

    A named tuple rather than a dataclass: a request builds hundreds of them, and a tuple is
    built several times faster while staying just as immutable.
    """

    id: str
    source: str
    layer: Layer = "memory"
    source_class: str | None = None
    content: str | None = None
    item: Item | None = None
    forms: Mapping[str, str] = NO_FORMS
    locator: str | None = None
    required: bool = False
    priority: float = 0.0
    relevance: float = 0.0
    trust: float = 0.0
    freshness: float = 0.0
    tokens: int | None = None
    restate_at_end: bool = False
    restatement: str | None = None
    """The shorter text of its copy at the end (`restate_at_end`); None repeats it whole."""

    @property
    def accounting_class(self) -> str:
        """The class its tokens are reported under: `source_class`, else its layer."""
        return self.source_class or self.layer

    @property
    def raw_text(self) -> str:
        """The text its raw form is charged on and compared by."""
        return self.content if self.content is not None else visible_text(self.item or {})


CANDIDATE_DEFAULTS: Mapping[str, Any] = MappingProxyType(Candidate._field_defaults)


@dataclass(frozen=True)
class Contribution:
    source: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class AssemblyInput:
    contributions: tuple[Contribution, ...]
    history: Sequence[HistoryEntry] = ()
    """A paired history (as normalization leaves it), read from its newest end."""
    budget: Budget = POLICIES["balanced"]
    history_counts_toward_max_items: bool = True
    placement: Placement = "edges"
    min_relevance: float = 0.0
    near_duplicate_threshold: float = 0.9
    recall_cap: int | None = 20
    history_cut_step: int | None = None
    """When the history does not fit, cut it at a stable point placed every this many tokens
    from its start (see `app.domain.assemble.history_fit`); None cuts at the oldest entry that
    fits."""
    history_lead_source: str | None = None
    """Prefix candidates of this source close the prefix, right before the history (under
    `edges`; under `input_order` the last contribution is there already)."""
    history_tokens: int | None = None
    """The tokens of the whole history (the sum of its entries'), when the caller keeps that
    total: the fitting then reads only the newest entries it keeps, and what lies before them
    is planned as a run, however long the history."""
    keep_newest: bool = False
    """When the newest atomic group of the history does not fit what is left, show its tool
    outputs truncated head and tail (naming the fact that holds each whole) rather than
    nothing, leaving room for the turn back to the latest user message when it can."""


FINGERPRINT_CHARS = 16
"""Hex digits of an item's fingerprint (64 bits). Plans stored before fingerprints were cut to
this length are compared on their first `FINGERPRINT_CHARS` digits."""


def canonical_hash(value: Any) -> str:
    """SHA-256 of the value's JSON with sorted keys (an assembly hashes every selected item
    twice: fingerprint and plan hash)."""
    return hashlib.sha256(encode_json(value, sort_keys=True)).hexdigest()


def fingerprint_of(
    item_id: str, source: str, form: str, content: str | None, item: Item | None
) -> str:
    """Equal for two selected items exactly when the model sees the same bytes for them: the
    first `FINGERPRINT_CHARS` hex digits of their `canonical_hash` (every plan stores one per
    item, and 64 bits leave a collision between two items of one lineage out of reach)."""
    return canonical_hash([item_id, source, form, content, item])[:FINGERPRINT_CHARS]


PLAN_HASH_FIELDS = ("id", "source", "layer", "form", "content", "item")
"""What a plan's hash covers of each selected item, in position order: what the model sees of
it and where. The one definition an assembly hashes its plan by (`plan_hash_of`) and a stored
plan read back is checked against (`stored_plan_hash`)."""
_HASHED_ATTRIBUTES = operator.attrgetter(*PLAN_HASH_FIELDS)
_HASHED_KEYS = operator.itemgetter(*PLAN_HASH_FIELDS)


def plan_hash_of(items: Iterable[SelectedItem]) -> str:
    """The hash of a plan's selected items (`PLAN_HASH_FIELDS`)."""
    return canonical_hash([list(_HASHED_ATTRIBUTES(item)) for item in items])


def stored_plan_hash(items: Iterable[Mapping[str, Any]]) -> str:
    """`plan_hash_of` the items of an answer (each item as the answer gives it)."""
    return canonical_hash([list(_HASHED_KEYS(item)) for item in items])


class SelectedItem(NamedTuple):
    id: str
    source: str
    layer: Layer
    source_class: str
    form: str
    position: int
    tokens: int
    content: str | None
    item: Item | None

    @property
    def fingerprint(self) -> str:
        """`fingerprint_of` this item."""
        return fingerprint_of(self.id, self.source, self.form, self.content, self.item)


class PlanEntry(TypedDict):
    """What became of one candidate or history entry. A plain dict: it goes into the response,
    and into the stored plan, as it is."""

    id: str
    source: str
    layer: Layer
    source_class: str
    decision: Decision
    reason: DropReason | None
    form: str
    tokens: int
    score: float | None
    position: int | None


@dataclass(frozen=True)
class AssemblyPlan:
    items: tuple[SelectedItem, ...]
    plan: tuple[PlanEntry, ...]
    total_tokens: int
    truncated: bool
    over_budget: bool
    by_source_class: dict[str, int]
    plan_hash: str


def ranking_score(c: Candidate) -> float:
    return c.relevance + 0.25 * c.priority + 0.15 * c.trust + 0.10 * c.freshness


def fits(tokens: int, limit: int | None, *, used: int) -> bool:
    """Whether `tokens` more stay within `limit` (None: unbounded) after `used`."""
    return limit is None or used + tokens <= limit
