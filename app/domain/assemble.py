"""Context assembly: choose which candidates and how much history a model sees, and in what order.

`assemble` is a pure function of its input and the token counter. Invariants of its result:

- Every candidate and every history entry appears in `plan` exactly once, in input order
  (contributions in request order, then history), either selected (with the form used and the
  position of its first occurrence) or dropped with exactly one reason.
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
  (`stable_history_start`); what fitted but lies before it is dropped as `history_cut`.
- The same input gives the same plan and `plan_hash`; the `prefix` layer is ordered by
  (source, id) only (candidates of `history_lead_source` last), so its bytes do not change
  when other layers change. Under `edges` the history follows the prefix directly and the
  other layers follow the history, so a change to them never moves the history's bytes.

A non-required candidate is checked in this order: `max_items` (which ends the walk), the group's
item quota, the token bounds (trying the raw form, then `skeleton`, then `reference`), then
near-duplication against the selected retrieval texts.

Ranking is a total order: required first, then `ranking_score` desc, relevance desc, tokens asc,
id asc (then source, locator and input position, so that equal-looking candidates never tie).
Scores are assumed finite (the shell rejects NaN); `near_duplicate_threshold` is in (0, 1].
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypedDict, get_args

from app.domain.budget import POLICIES, Budget
from app.domain.history import HistoryEntry, history_cuts
from app.domain.items import OUTPUT_TYPES, CountTokens, Item, item_type, visible_text
from app.domain.json_encoding import encode_json
from app.domain.shingles import ShingleIndex, Shingles, word_shingles
from app.domain.truncation import MIN_OUTPUT_TOKENS, shrink_outputs

__all__ = [
    "CANDIDATE_DEFAULTS",
    "HISTORY_SOURCE",
    "LAYERS",
    "AssemblyDiff",
    "AssemblyInput",
    "AssemblyPlan",
    "Candidate",
    "Contribution",
    "Decision",
    "DropReason",
    "FallbackForm",
    "Layer",
    "Moved",
    "Placement",
    "PlanEntry",
    "RawForm",
    "ReusedPrefix",
    "SelectedItem",
    "assemble",
    "atomic_groups",
    "diff_selections",
    "ranking_score",
    "reused_prefix",
    "stable_history_start",
]

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
    history: tuple[HistoryEntry, ...] = ()
    budget: Budget = POLICIES["balanced"]
    history_counts_toward_max_items: bool = True
    placement: Placement = "edges"
    min_relevance: float = 0.0
    near_duplicate_threshold: float = 0.9
    recall_cap: int | None = 20
    history_cut_step: int | None = None
    """When the history does not fit, cut it at a stable point (see `stable_history_start`)
    placed every this many tokens from its start; None cuts at the oldest entry that fits."""
    history_lead_source: str | None = None
    """Prefix candidates of this source close the prefix, right before the history (under
    `edges`; under `input_order` the last contribution is there already)."""
    keep_newest: bool = False
    """When the newest atomic group of the history does not fit what is left, show its tool
    outputs truncated head and tail (naming the fact that holds each whole) rather than
    nothing, leaving room for the turn back to the latest user message when it can."""


def _canonical_hash(value: Any) -> str:
    """SHA-256 of the value's JSON with sorted keys (an assembly hashes every selected item
    twice: fingerprint and plan hash)."""
    return hashlib.sha256(encode_json(value, sort_keys=True)).hexdigest()


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
        """Equal for two items exactly when the model sees the same bytes for them."""
        return _canonical_hash([self.id, self.source, self.form, self.content, self.item])


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


def stable_history_start(
    history: Sequence[HistoryEntry], tokens: Sequence[int], *, fitting_start: int, step: int
) -> int:
    """Where a history that no longer fits is cut: the first stable point at or after
    `fitting_start` (the oldest entry the budget could keep), else `fitting_start` itself.

    Stable points are the first `history_cuts` at or after every `step` tokens counted from the
    history's start. They depend only on the entries before them, so appending never moves
    one: the cut stays put across calls until the kept history no longer fits, then jumps a
    whole step, and the calls in between share their prefix.
    """
    position, passed, next_mark = 0, 0, step
    for cut in history_cuts([entry.item for entry in history]):
        passed += sum(tokens[position:cut])
        position = cut
        if passed >= next_mark:
            if fitting_start <= cut < len(history):
                return cut
            next_mark = (passed // step + 1) * step
    return fitting_start


def atomic_groups(items: Sequence[Item]) -> tuple[range, ...]:
    """Index ranges that history is cut between, in order, covering `items`: the ranges between
    consecutive `history_cuts`, the last one running to the end."""
    bounds = history_cuts(items)
    if bounds[-1] != len(items):
        bounds = (*bounds, len(items))
    return tuple(range(start, end) for start, end in itertools.pairwise(bounds))


def _shrink_newest(
    history: Sequence[HistoryEntry],
    tokens: Sequence[int],
    spans: Sequence[range],
    *,
    room: int,
    count: CountTokens,
) -> dict[int, tuple[Item, int]]:
    """The tool outputs of the newest group (`spans[-1]`) truncated head and tail, each naming
    the fact that holds it whole, so that the group fits `room`, and fits beside the groups
    back to the latest user message too where that leaves each output `MIN_OUTPUT_TOKENS`.
    Empty when even `room` cannot hold the group's calls and the least of each output."""
    newest = spans[-1]
    outputs = [
        k
        for k in newest
        if item_type(history[k].item) in OUTPUT_TYPES
        and isinstance(history[k].item.get("output"), str | list)
    ]
    fixed = sum(tokens[k] for k in newest if k not in outputs)
    users = [
        n
        for n, span in enumerate(spans[:-1])
        if any(
            item_type(history[k].item) == "message" and history[k].item.get("role") == "user"
            for k in span
        )
    ]
    between = sum(tokens[k] for span in spans[users[-1] : -1] for k in span) if users else 0
    floor = fixed + MIN_OUTPUT_TOKENS * len(outputs)
    target = room - between if room - between >= floor else room
    shrunk = shrink_outputs(
        [
            (
                history[k].item["output"],
                tokens[k],
                f"fact seq {history[k].seq}" if history[k].seq is not None else None,
            )
            for k in outputs
        ],
        budget=target - fixed,
        count_tokens=count,
    )
    if not outputs or shrunk is None:
        return {}
    changed: dict[int, tuple[Item, int]] = {}
    for k, output in zip(outputs, shrunk, strict=True):
        if output is not history[k].item["output"]:
            item = {**history[k].item, "output": output}
            changed[k] = (item, count(visible_text(item)))
    return changed


def assemble(inp: AssemblyInput, *, count_tokens: CountTokens) -> AssemblyPlan:
    """Select, degrade and place candidates and history under `inp.budget`; see the module doc."""
    count = functools.cache(count_tokens)
    budget = inp.budget
    candidates: list[Candidate] = []
    scores: list[float] = []
    raw_tokens: list[int] = []
    reasons: dict[int, DropReason] = {}
    chosen: dict[int, tuple[str, int]] = {}  # index -> (form, tokens of that form)

    # One pass over the input: superseded contributions, unattributed retrieval, and identity
    # dedupe (the stronger wins, the first seen on an exact tie).
    last_of_source = {contribution.source: n for n, contribution in enumerate(inp.contributions)}
    winner: dict[tuple[str, str], int] = {}
    for n, contribution in enumerate(inp.contributions):
        superseded = last_of_source[contribution.source] != n
        for c in contribution.candidates:
            if (c.content is None) == (c.item is None):
                raise ValueError(f"candidate {c.id!r}: give exactly one of `content` and `item`")
            i = len(candidates)
            candidates.append(c)
            scores.append(ranking_score(c))
            raw_tokens.append(c.tokens if c.tokens is not None else count(c.raw_text))
            if superseded:
                reasons[i] = "superseded_contribution"
                continue
            if c.layer == "retrieval" and not c.locator:
                reasons[i] = "unattributed"
                continue
            identity = ("locator", c.locator) if c.locator is not None else ("id", c.id)
            held = winner.setdefault(identity, i)
            if held == i:
                continue
            h = candidates[held]
            if (c.required, scores[i], c.relevance) > (h.required, scores[held], h.relevance):
                reasons[held] = "duplicate"
                winner[identity] = i
            else:
                reasons[i] = "duplicate"

    # Rank keys, unique thanks to `i` last. A retrieval source offers only its best
    # `recall_cap` (the rest are dropped whatever their order), so only those are ranked.
    considered_keys: list[tuple[Any, ...]] = []
    by_retrieval_source: dict[str, list[tuple[Any, ...]]] = {}
    cap = inp.recall_cap
    for i in winner.values():
        c = candidates[i]
        if not c.required and c.relevance < inp.min_relevance:
            reasons[i] = "below_relevance"
            continue
        key = (
            not c.required,
            -scores[i],
            -c.relevance,
            raw_tokens[i],
            c.id,
            c.source,
            c.locator or "",
            i,
        )
        if c.layer == "retrieval" and cap is not None:
            by_retrieval_source.setdefault(c.source, []).append(key)
        else:
            considered_keys.append(key)
    for keys in by_retrieval_source.values():
        if cap is not None and len(keys) > cap:
            offered = heapq.nsmallest(cap, keys)
            for key in keys:
                if not offered or key > offered[-1]:
                    reasons[key[-1]] = "recall_cap"
            keys = offered
        considered_keys += keys
    considered = [key[-1] for key in sorted(considered_keys)]

    # The walk, in rank order.
    def fits(tokens: int, limit: int | None, *, used: int) -> bool:
        return limit is None or used + tokens <= limit

    selected: list[int] = []
    total_tokens = 0
    group_items: Counter[str] = Counter()
    group_tokens: Counter[str] = Counter()
    near_duplicates = ShingleIndex(inp.near_duplicate_threshold)
    # Shingles are computed only for retrieval candidates the walk reaches, each once; selected
    # ones wait in `unindexed` until a probe needs them (required ones may never be compared).
    shingles_of: dict[int, Shingles] = {}
    unindexed: list[int] = []

    def shingles(i: int) -> Shingles:
        if i not in shingles_of:
            shingles_of[i] = word_shingles(candidates[i].raw_text)
        return shingles_of[i]

    stopped = False
    for i in considered:
        c = candidates[i]
        # A restated candidate is shown twice, and charged for both copies: the same again
        # (`copies`), or its restatement (`extra`).
        copies, extra = 1, 0
        if c.restate_at_end and inp.placement == "edges":
            if c.restatement is None:
                copies = 2
            else:
                extra = count(c.restatement)
        if c.source_class:
            group = f"class:{c.source_class}"
        elif c.locator:
            group = f"scheme:{c.locator.split(':', 1)[0]}"
        else:
            group = f"layer:{c.layer}"
        form, tokens = RAW_FORM, raw_tokens[i]
        if not c.required:
            if stopped or (budget.max_items is not None and len(selected) >= budget.max_items):
                stopped = True
                reasons[i] = "max_items"
                continue
            limit = budget.max_items_per_source
            if limit is not None and group_items[group] >= limit:
                reasons[i] = "source_max_items"
                continue
            # Lazy: a cheaper form is counted only when every form before it failed.
            sizes = (
                (name, tokens if name == RAW_FORM else count(c.forms[name]))
                for name in (RAW_FORM, *FALLBACK_FORMS)
                if name == RAW_FORM or name in c.forms
            )
            fitting = next(
                (
                    (name, size)
                    for name, size in sizes
                    if fits(copies * size + extra, budget.max_tokens, used=total_tokens)
                    and fits(
                        copies * size + extra,
                        budget.max_tokens_per_source,
                        used=group_tokens[group],
                    )
                ),
                None,
            )
            if fitting is None:
                raw_fits_total = fits(copies * tokens + extra, budget.max_tokens, used=total_tokens)
                reasons[i] = "source_max_tokens" if raw_fits_total else "max_tokens"
                continue
            # Checked last, so that only candidates that would otherwise be selected are ever
            # shingled; the selection is the same as checking it first, since a drop changes no
            # counter, but a candidate failing both is reported by the bound it fails.
            if c.layer == "retrieval":
                for j in unindexed:
                    near_duplicates.add(shingles(j))
                unindexed.clear()
                if near_duplicates.has_near_duplicate(shingles(i)):
                    reasons[i] = "near_duplicate"
                    continue
            form, tokens = fitting
        chosen[i] = (form, tokens)
        selected.append(i)
        total_tokens += copies * tokens + extra
        group_items[group] += 1
        group_tokens[group] += copies * tokens + extra
        if c.layer == "retrieval":
            unindexed.append(i)

    # History: the newest atomic groups that fit what is left, as one contiguous suffix.
    history_tokens = [
        entry.tokens if entry.tokens is not None else count(visible_text(entry.item))
        for entry in inp.history
    ]
    history_items = [entry.item for entry in inp.history]
    counted_items = len(selected)
    history_start = len(inp.history)
    history_reason: DropReason | None = None
    spans = atomic_groups(history_items)
    for newest, span in enumerate(reversed(spans), start=1):
        span_tokens = sum(history_tokens[k] for k in span)
        if inp.history_counts_toward_max_items and not fits(
            len(span), budget.max_items, used=counted_items
        ):
            history_reason = "max_items"
            break
        if (
            newest == 1
            and inp.keep_newest
            and budget.max_tokens is not None
            and not fits(span_tokens, budget.max_tokens, used=total_tokens)
        ):
            shrunk = _shrink_newest(
                inp.history,
                history_tokens,
                spans,
                room=budget.max_tokens - total_tokens,
                count=count,
            )
            for k, (cut_item, cut_tokens) in shrunk.items():
                history_items[k] = cut_item
                history_tokens[k] = cut_tokens
            span_tokens = sum(history_tokens[k] for k in span)
        if not fits(span_tokens, budget.max_tokens, used=total_tokens):
            history_reason = "max_tokens"
            break
        history_start = span.start
        total_tokens += span_tokens
        if inp.history_counts_toward_max_items:
            counted_items += len(span)
    fitting_start = history_start
    if history_start > 0 and inp.history_cut_step is not None:
        history_start = stable_history_start(
            inp.history,
            history_tokens,
            fitting_start=fitting_start,
            step=inp.history_cut_step,
        )
        cut = range(fitting_start, history_start)
        total_tokens -= sum(history_tokens[k] for k in cut)
        if inp.history_counts_toward_max_items:
            counted_items -= len(cut)

    # Placement.
    restated: list[int] = []
    if inp.placement == "edges":
        rank_of = {i: n for n, i in enumerate(selected)}
        by_layer: dict[Layer, list[int]] = {layer: [] for layer in LAYERS}
        for i in selected:
            by_layer[candidates[i].layer].append(i)
        middle = [i for i in selected if candidates[i].layer in ("memory", "retrieval")]
        order = [
            # Sorted by (source, id) alone so that the prefix bytes survive any other change;
            # the history's lead closes it.
            *sorted(
                by_layer["prefix"],
                key=lambda i: (
                    candidates[i].source == inp.history_lead_source,
                    candidates[i].source,
                    candidates[i].id,
                    rank_of[i],
                ),
            ),
            # The strongest at the block's edges, the weakest in its middle.
            *middle[0::2],
            *reversed(middle[1::2]),
            *(i for i in by_layer["task"] if not candidates[i].required),
            *(i for i in by_layer["task"] if candidates[i].required),
            *sorted(by_layer["recent"]),  # input order: recent candidates are chronological
        ]
        # The history follows the stable prefix directly, and whatever may change from call
        # to call (memory, retrieval, task state) follows the history: an update then never
        # moves the bytes of the history, which are most of a session's reusable prefix.
        leading = len(by_layer["prefix"])
        restated = [i for i in order if candidates[i].restate_at_end]
    else:
        order = sorted(selected)
        leading = len(order)  # input order: contributions, then the history

    items: list[SelectedItem] = []
    position_of: dict[int, int] = {}

    def place(
        c: Candidate, *, item_id: str, form: str, tokens: int, text: str | None = None
    ) -> None:
        """Place `c` in `form`, or as `text` (a restatement) when given."""
        raw = form == RAW_FORM and text is None
        items.append(
            SelectedItem(
                id=item_id,
                source=c.source,
                layer=c.layer,
                source_class=c.accounting_class,
                form=form,
                position=len(items),
                tokens=tokens,
                content=text if text is not None else c.content if raw else c.forms[form],
                item=c.item if raw else None,
            )
        )

    def place_candidates(chosen_order: Sequence[int]) -> None:
        for i in chosen_order:
            position_of[i] = len(items)
            place(candidates[i], item_id=candidates[i].id, form=chosen[i][0], tokens=chosen[i][1])

    place_candidates(order[:leading])
    history_position = len(items)
    for k in range(history_start, len(inp.history)):
        entry = inp.history[k]
        items.append(
            SelectedItem(
                id=entry.id,
                source=HISTORY_SOURCE,
                layer="recent",
                source_class=HISTORY_SOURCE,
                form=RAW_FORM if history_items[k] is entry.item else TRUNCATED_FORM,
                position=len(items),
                tokens=history_tokens[k],
                content=None,
                item=history_items[k],
            )
        )
    place_candidates(order[leading:])
    for i in restated:
        c = candidates[i]
        form, tokens = chosen[i]
        if c.restatement is not None:
            form, tokens = RAW_FORM, count(c.restatement)
        place(c, item_id=c.id + RESTATED_SUFFIX, form=form, tokens=tokens, text=c.restatement)

    plan: list[PlanEntry] = []
    for i, c in enumerate(candidates):
        reason = reasons.get(i)
        form, tokens = chosen[i] if reason is None else (RAW_FORM, raw_tokens[i])
        plan.append(
            {
                "id": c.id,
                "source": c.source,
                "layer": c.layer,
                "source_class": c.source_class or c.layer,  # Candidate.accounting_class
                "decision": "selected" if reason is None else "dropped",
                "reason": reason,
                "form": form,
                "tokens": tokens,
                "score": scores[i],
                "position": position_of.get(i),
            }
        )
    plan += [
        {
            "id": entry.id,
            "source": HISTORY_SOURCE,
            "layer": "recent",
            "source_class": HISTORY_SOURCE,
            "decision": "selected" if k >= history_start else "dropped",
            "reason": None
            if k >= history_start
            else history_reason
            if k < fitting_start
            else "history_cut",
            "form": RAW_FORM if history_items[k] is entry.item else TRUNCATED_FORM,
            "tokens": history_tokens[k],
            "score": None,
            "position": history_position + k - history_start if k >= history_start else None,
        }
        for k, entry in enumerate(inp.history)
    ]

    by_source_class: Counter[str] = Counter()
    for selected_item in items:
        by_source_class[selected_item.source_class] += selected_item.tokens
    return AssemblyPlan(
        items=tuple(items),
        plan=tuple(plan),
        total_tokens=total_tokens,
        truncated=bool(reasons) or history_start > 0,
        over_budget=not fits(0, budget.max_tokens, used=total_tokens)
        or not fits(0, budget.max_items, used=counted_items),
        by_source_class=dict(sorted(by_source_class.items())),
        plan_hash=_canonical_hash(
            [[it.id, it.source, it.layer, it.form, it.content, it.item] for it in items]
        ),
    )


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
