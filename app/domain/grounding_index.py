"""Where the identifiers of a session's log occur: what the live grader reads instead of the
history's text, so that grading an action costs what the action, the context it graded and the
log's vocabulary hold, not what the whole log holds.

An identifier (`app.domain.grounding.extract_identifiers`) is made of run characters only
(ASCII letters, digits and `_./-`), and an item's text joins its strings with newlines, so an
identifier occurs in a text exactly when it occurs within one maximal run of run characters of
it. The index keeps each distinct run of the log's model-visible facts once, with the seqs of
the facts whose text holds it (its postings, in seq order), and is advanced by the facts
appended since (it is kept with the log: `LoggedUpTo.derived`). The service's own facts
(compactions, goals, world state), whose items the fold does not keep, are added the first
time a grade meets them inside an elided range, each once.

Invariant: `grade_indexed` gives what `app.domain.grounding.grade_action` gives over the same
history, shown text and elided ranges, for any action of at most `MAX_GRADED_IDENTIFIERS`
identifiers (pinned by a test at every model call of the public runs). The texts the index does
not hold (the items compactions wrote into the active history) are given to it as they are.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from app.domain.facts import LoggedUpTo
from app.domain.grounding import (
    MAX_GRADED_IDENTIFIERS,
    ActionGrounding,
    Grounding,
    action_grounding,
    extract_identifiers,
    item_text,
    items_text,
)
from app.domain.text_search import Strings

__all__ = [
    "ElidedRange",
    "OccurrenceIndex",
    "grade_indexed",
    "keep_index",
    "kept_index",
    "occurrence_index",
]

RUN = re.compile(r"[A-Za-z0-9_./-]+")
"""A maximal run of the characters identifiers are made of."""
_INDEX_KEY = ("grounding", "occurrences")


class OccurrenceIndex:
    """The distinct runs of a log's model-visible facts, each with its postings. Not safe to
    advance from two threads at once, nor to read while advanced: its callers take turns
    (`lock`)."""

    def __init__(self) -> None:
        self.lock: ContextManager[object] = nullcontext()
        """What a caller holds while it advances or reads the index: the shell sets a lock
        (graders of one session may run at once in its threads); the core only holds it."""
        self.facts = 0
        """How many of the log's model-visible facts, in seq order, are indexed."""
        self._postings: dict[str, array[int]] = {}
        self._runs: list[str] = []
        """The distinct runs, in the order they first occurred."""
        self._vocabulary = ""
        """The runs, each followed by a newline: what a search for identifiers reads."""
        self._starts: list[int] = []
        """Where each run starts in `_vocabulary`."""
        self.postings = 0
        """Postings held, all told (a measure of the index's size)."""
        self._own: set[int] = set()
        """The seqs of the service's own facts indexed."""
        self._restored: tuple[array[int], array[int]] | None = None
        """Of an index restored from a checkpoint (`restored`): each restored run's postings,
        as one column of seqs and where each run's start in it, read in place; a run's
        postings are read out (into `_postings`) when a fact appended adds to them."""
        self._restored_runs = 0
        self._run_ids: dict[str, int] | None = None
        """The restored runs' ids by run, built when a fact is first indexed after a restore."""

    def advance(self, logged: LoggedUpTo) -> None:
        """Index the facts of `logged` not indexed yet."""
        with self.lock:
            order = logged.order
            added: list[str] = []
            logged.read_ahead(self.facts, len(order))
            for position in range(self.facts, len(order)):
                seq = order[position]
                self._index(seq, logged.item_of(seq), added, in_order=True)
            self.facts = max(self.facts, len(order))
            self._extend_vocabulary(added)

    def own_facts_missing(self, seqs: Sequence[int]) -> list[int]:
        """Of the service's own facts `seqs`, those not indexed yet (`add_own_facts`)."""
        with self.lock:
            return [seq for seq in seqs if seq not in self._own]

    def add_own_facts(self, facts: Sequence[tuple[int, object]]) -> None:
        """Index the service's own facts (seq, item) given, once each: the fold does not keep
        their items, so the grader reads the ones it meets the first time it meets them."""
        with self.lock:
            added: list[str] = []
            for seq, item in facts:
                if seq not in self._own:
                    self._own.add(seq)
                    self._index(seq, item, added, in_order=False)
            self._extend_vocabulary(added)

    def _index(self, seq: int, item: object, added: list[str], *, in_order: bool) -> None:
        for run in dict.fromkeys(RUN.findall(item_text(item))):
            postings = self._postings.get(run)
            if postings is None and self._restored is not None:
                if self._run_ids is None:
                    restored = self._runs[: self._restored_runs]
                    self._run_ids = {run: at for at, run in enumerate(restored)}
                at = self._run_ids.get(run)
                if at is not None:
                    self._postings[run] = postings = self._restored_postings(at)
            if postings is None:
                self._postings[run] = postings = array("q")
                added.append(run)
            if in_order and (not postings or postings[-1] < seq):
                postings.append(seq)
            else:  # postings stay in seq order (an own fact comes in after later facts)
                postings.insert(bisect.bisect_left(postings, seq), seq)
            self.postings += 1

    def _extend_vocabulary(self, added: list[str]) -> None:
        if added:
            start = len(self._vocabulary)
            for run in added:
                self._starts.append(start)
                start += len(run) + 1
            self._runs += added
            self._vocabulary += "".join(f"{run}\n" for run in added)

    def holding(self, strings: Strings) -> dict[str, list[array[int]]]:
        """For each of `strings` the index holds within some run, the postings of every run
        holding it: one pass over the vocabulary."""
        with self.lock:
            vocabulary, starts = self._vocabulary, self._starts
            found: dict[str, set[int]] = {}
            for end, string in strings.occurrences(vocabulary):
                found.setdefault(string, set()).add(bisect.bisect_right(starts, end) - 1)
            return {
                string: [self._postings_of(run) for run in sorted(held)]
                for string, held in found.items()
            }

    def _postings_of(self, at: int) -> array[int]:
        """The postings of run `at` (its index among the runs)."""
        postings = self._postings.get(self._runs[at])
        if postings is None:
            return self._restored_postings(at)
        return postings

    def _restored_postings(self, at: int) -> array[int]:
        assert self._restored is not None
        offsets, seqs = self._restored
        return seqs[offsets[at] : offsets[at + 1]]

    def record(self) -> dict[str, Any]:
        """This index as a checkpoint holds it (`restored`): the vocabulary, and every run's
        postings as one column."""
        with self.lock:
            offsets, seqs = array("q", [0]), array("q")
            for at in range(len(self._runs)):
                seqs.extend(self._postings_of(at))
                offsets.append(len(seqs))
            return {
                "facts": self.facts,
                "postings": self.postings,
                "vocabulary": self._vocabulary,
                "starts": array("q", self._starts),
                "offsets": offsets,
                "seqs": seqs,
                "own": sorted(self._own),
            }

    @classmethod
    def restored(cls, record: Mapping[str, Any]) -> OccurrenceIndex:
        """The index `record` holds (`record`): read in place, each run's postings read out
        only when a fact appended adds to them. Raises ValueError (or the KeyError, TypeError
        of a malformed record) when it cannot."""
        index = cls()
        vocabulary: str = record["vocabulary"]
        runs = vocabulary.split("\n")[:-1]
        offsets, seqs = _column(record["offsets"]), _column(record["seqs"])
        if not len(offsets) == len(runs) + 1 == len(record["starts"]) + 1 or (
            offsets[-1] != len(seqs)
        ):
            raise ValueError("an occurrence index's columns differ in length")
        index.facts, index.postings = record["facts"], record["postings"]
        index._vocabulary, index._runs, index._starts = vocabulary, runs, record["starts"]
        index._own = set(record["own"])
        index._restored, index._restored_runs = (offsets, seqs), len(runs)
        return index


def _column(values: Sequence[int]) -> array[int]:
    """`values` as 64-bit integers (read back in place already, or a short list)."""
    if isinstance(values, array) and values.typecode == "q":
        return values
    return array("q", values)


def kept_index(logged: LoggedUpTo) -> OccurrenceIndex | None:
    """The occurrence index kept with `logged`, if one was made."""
    index = logged.derived.get(_INDEX_KEY)
    return index if isinstance(index, OccurrenceIndex) else None


def keep_index(logged: LoggedUpTo, index: OccurrenceIndex, lock: ContextManager[object]) -> None:
    """Keeps `index` (restored) with `logged`, taking `lock`, unless one is kept already."""
    index.lock = lock
    logged.derived.setdefault(_INDEX_KEY, index)


def occurrence_index(
    logged: LoggedUpTo, *, lock: Callable[[], ContextManager[object]] = nullcontext
) -> OccurrenceIndex:
    """The occurrence index kept with `logged` (made, holding `lock()`, when there is none yet),
    advanced to it."""
    index = logged.derived.get(_INDEX_KEY)
    if index is None:
        made = OccurrenceIndex()
        made.lock = lock()
        index = logged.derived.setdefault(_INDEX_KEY, made)  # one index, whoever made it first
    assert isinstance(index, OccurrenceIndex)
    index.advance(logged)
    return index


@dataclass(frozen=True)
class ElidedRange:
    """A run of facts a context listed as elided: `first` to `last` (seqs, both included)."""

    first: int
    last: int
    form: str


def grade_indexed(
    action: Sequence[object],
    *,
    index: OccurrenceIndex,
    in_active: Callable[[int], bool],
    written: Sequence[object],
    elided: Sequence[ElidedRange],
    shown: str,
    goal: str,
) -> ActionGrounding:
    """Grade the model output items `action` as `grade_action` does, reading `index` for the
    log's model-visible facts. The history before the call is the facts of the active history
    as the context saw it (`in_active`) and the items in `written` (a compaction's, a fork's
    inheritance), and every fact inside the `elided` ranges (in seq order, apart, as a context
    lists them): the model-visible ones, and the service's own, which `index` must hold
    (`OccurrenceIndex.add_own_facts`). `shown` is the text of what the context sent."""
    goal_identifiers = extract_identifiers(goal)
    candidates = sorted(
        identifier
        for identifier in extract_identifiers(items_text(action))
        if identifier not in goal_identifiers and identifier not in goal
    )
    graded = candidates[:MAX_GRADED_IDENTIFIERS]
    strings = Strings(graded)
    postings = index.holding(strings)
    starts = [entry.first for entry in elided]

    def range_of(seq: int) -> int | None:
        at = bisect.bisect_right(starts, seq) - 1
        return at if at >= 0 and seq <= elided[at].last else None

    def first_range(found: Sequence[int]) -> int | None:
        # Ranges and postings are both in seq order: the first posting inside a range is in
        # the first range any of them is in.
        return next((at for seq in found if (at := range_of(seq)) is not None), None)

    in_written = strings.within(items_text(written))
    needed = frozenset(
        identifier
        for identifier in graded
        if identifier in in_written
        or any(
            in_active(seq) or range_of(seq) is not None
            for found in postings.get(identifier, ())
            for seq in found
        )
    )
    visible = frozenset(strings.within(shown) & needed)
    recallable: dict[str, int] = {}
    for identifier in needed - visible:
        at = [first_range(found) for found in postings.get(identifier, ())]
        first = min((found for found in at if found is not None), default=None)
        if first is not None:
            recallable[identifier] = first
    return action_grounding(
        Grounding(needed=needed, visible=visible, recallable=recallable),
        forms=[entry.form for entry in elided],
        ungraded=len(candidates) - len(graded),
    )
