"""Advice's figures of a session view (`HistoryFigures`), kept as the view advances: each
settled item is read once, into running totals and indexes, and only the view's open tail is
read again on each call.

Invariants:

- `figures_of(digest, view)` equals `history_figures(view.items, view.tokens)` for every view
  (pinned by a property test over every trajectory at every seq).
- A digest reads the settled columns of one view lineage (`view.settled`) and grows like them
  (`app.domain.growing`): appended in place by the first advance at its current length, copied
  otherwise; a view of another lineage starts a digest from scratch.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.advice import (
    KEPT_OUTPUTS,
    MASKED_OUTPUT_TOKENS,
    RECENT_OUTPUTS,
    RECENT_TURNS,
    REPEATED_QUESTION_COUNT,
    HistoryFigures,
    is_turn_start,
    is_user_question,
    question_key,
)
from app.domain.column_codec import Plain, Span
from app.domain.compaction.clearing import is_cleared_output
from app.domain.growing import Claims, grown
from app.domain.items import OUTPUT_TYPES, Item, is_model_output, item_type, visible_text
from app.domain.session_view import HistoryView

__all__ = ["FiguresDigest", "digest_of", "digest_record", "digest_restored", "figures_of"]


class _Running:
    """Running totals and indexes of a view's settled items, growing with them."""

    def __init__(self, settled: object) -> None:
        self.settled = settled
        self.chars: list[int] = [0]
        """`chars[n]`: visible characters of the first n items."""
        self.tokens: list[int] = [0]
        """`tokens[n]`: tokens of the first n items but state fragments."""
        self.outputs: list[int] = []
        """The positions of tool outputs."""
        self.output_chars: list[int] = [0]
        self.maskable: list[int] = [0]
        """Running sum of what masking each output (not already cleared) would free."""
        self.model_outputs: list[int] = []
        self.turns: list[int] = []
        """The positions where turns start."""
        self.after_output: list[bool] = []
        """Whether the last item that is not a state fragment, up to each position, is model
        output."""
        self.questions: dict[str, list[int]] = {}
        """Each question's positions."""
        self.repeated: list[tuple[int, str]] = []
        """Each question as it was asked for the `REPEATED_QUESTION_COUNT`th time: where."""
        self.claims = Claims()

    def __len__(self) -> int:
        return len(self.after_output)

    def lengths(self) -> tuple[int, int, int, int, int, int]:
        return (
            len(self),
            len(self.outputs),
            len(self.maskable),
            len(self.model_outputs),
            len(self.turns),
            len(self.repeated),
        )

    def add(self, position: int, item: Item, tokens: int, fragment: bool) -> None:
        text = visible_text(item)
        self.chars.append(self.chars[-1] + len(text))
        after = self.after_output[-1] if self.after_output else False
        model_output = is_model_output(item)
        if model_output:
            self.model_outputs.append(position)
        if fragment:
            self.tokens.append(self.tokens[-1])
            self.after_output.append(after)
        else:
            self.tokens.append(self.tokens[-1] + tokens)
            if is_turn_start(item, model_output, after_output=after) or not self.turns:
                self.turns.append(position)
            self.after_output.append(model_output)
        if item_type(item) in OUTPUT_TYPES:
            self.outputs.append(position)
            self.output_chars.append(self.output_chars[-1] + len(text))
            if not is_cleared_output(item):
                self.maskable.append(self.maskable[-1] + max(0, tokens - MASKED_OUTPUT_TOKENS))
        if is_user_question(item):
            key = question_key(text)
            asked = self.questions.setdefault(key, [])
            asked.append(position)
            if key and len(asked) == REPEATED_QUESTION_COUNT:
                self.repeated.append((position, key))

    def copy(self, lengths: tuple[int, int, int, int, int, int]) -> _Running:
        rows, outputs, maskable, model_outputs, turns, repeated = lengths
        copy = _Running(self.settled)
        copy.chars = self.chars[: rows + 1]
        copy.tokens = self.tokens[: rows + 1]
        copy.outputs = self.outputs[:outputs]
        copy.output_chars = self.output_chars[: outputs + 1]
        copy.maskable = self.maskable[:maskable]
        copy.model_outputs = self.model_outputs[:model_outputs]
        copy.turns = self.turns[:turns]
        copy.after_output = self.after_output[:rows]
        copy.questions = {
            key: kept
            for key, asked in self.questions.items()
            if (kept := asked[: bisect.bisect_left(asked, rows)])
        }
        copy.repeated = self.repeated[:repeated]
        return copy


@dataclass(frozen=True)
class FiguresDigest:
    """A view's settled items digested (`_Running`), as far as `lengths` say."""

    running: _Running
    lengths: tuple[int, int, int, int, int, int]

    @property
    def rows(self) -> int:
        return self.lengths[0]


def digest_of(previous: FiguresDigest | None, view: HistoryView) -> FiguresDigest:
    """The digest of `view`'s settled items, advanced from `previous` where it reads the same
    settled columns, else built from scratch."""
    settled_rows = view.settled_rows
    if previous is None or previous.running.settled is not view.settled:
        previous = FiguresDigest(_Running(view.settled), (0, 0, 1, 0, 0, 0))
    if previous.rows > settled_rows:
        previous = FiguresDigest(_Running(view.settled), (0, 0, 1, 0, 0, 0))
    if previous.rows == settled_rows:
        return previous
    items, tokens, fragments = view.items, view.tokens, view.fragments

    def grow(running: _Running) -> None:
        for position in range(previous.rows, settled_rows):
            running.add(position, items[position], tokens[position], fragments[position])

    running = grown(
        previous.running,
        read=previous.lengths,
        now=previous.running.lengths(),
        copy=lambda: previous.running.copy(previous.lengths),
        grow=grow,
    )
    return FiguresDigest(running, running.lengths())


def figures_of(digest: FiguresDigest, view: HistoryView) -> HistoryFigures:
    """`history_figures` of `view`, from `digest` (its settled items) and its open tail."""
    head, settled = digest.running, digest.rows
    rows, outputs, maskable, model_outputs, turns, _ = digest.lengths
    # The tail, read on: it continues the settled items' turns.
    tail = _Running(None)
    if settled:
        tail.after_output.append(head.after_output[settled - 1])
    if turns:
        tail.turns.append(head.turns[turns - 1])
    items, tokens, fragments = view.items, view.tokens, view.fragments
    for position in range(settled, len(view)):
        tail.add(position, items[position], tokens[position], fragments[position])
    tail_turns = tail.turns[1:] if turns else tail.turns
    starts = [*head.turns[max(0, turns - RECENT_TURNS) : turns], *tail_turns][-RECENT_TURNS:]
    bounds = [*starts, len(view)]

    def tokens_before(position: int) -> int:
        if position <= settled:
            return head.tokens[position]
        return head.tokens[settled] + tail.tokens[position - settled]

    recent = [*head.outputs[max(0, outputs - RECENT_OUTPUTS) : outputs], *tail.outputs]
    return HistoryFigures(
        history_tokens=tokens_before(len(view)),
        turn_tokens=tuple(
            tokens_before(end) - tokens_before(start) for start, end in itertools.pairwise(bounds)
        ),
        recent_outputs=tuple(visible_text(items[j]) for j in recent[-RECENT_OUTPUTS:]),
        questions=_questions(head, digest, tail),
        has_model_output=bool(model_outputs or tail.model_outputs),
        chars=head.chars[rows] + tail.chars[-1],
        output_chars=head.output_chars[outputs] + tail.output_chars[-1],
        maskable_tokens=_maskable(head.maskable, maskable, tail.maskable),
    )


def _maskable(head: Sequence[int], length: int, tail: Sequence[int]) -> int:
    """What masking frees but for the newest `KEPT_OUTPUTS`, from the running sums of the
    settled items (`head`, the first `length`) and of the tail (`tail`, from 0)."""
    summed = (length - 1) + (len(tail) - 1) - KEPT_OUTPUTS  # how many outputs masking clears
    if summed <= 0:
        return 0
    if summed < length:
        return head[summed]
    return head[length - 1] + tail[summed - (length - 1)]


def _questions(
    head: _Running, digest: FiguresDigest, tail: _Running
) -> tuple[tuple[str, int], ...]:
    settled = digest.rows
    counts: dict[str, tuple[int, int]] = {}  # question: (where first asked, times)
    for _, key in head.repeated[: digest.lengths[5]]:
        asked = head.questions[key]
        counts[key] = (asked[0], bisect.bisect_left(asked, settled))
    for key, asked in tail.questions.items():
        before = head.questions.get(key, [])
        times = bisect.bisect_left(before, settled)
        first = before[0] if times else asked[0]
        counts[key] = (first, times + len(asked))
    return tuple(
        (key, times)
        for key, (_, times) in sorted(counts.items(), key=lambda entry: entry[1][0])
        if key and times >= REPEATED_QUESTION_COUNT
    )


def digest_record(digest: FiguresDigest) -> dict[str, Any]:
    """`digest` as a checkpoint holds it: its running totals, as far as its lengths say."""
    running = digest.running
    rows, outputs, maskable, model_outputs, turns, repeated = digest.lengths
    return {
        "chars": Span(running.chars, rows + 1),
        "tokens": Span(running.tokens, rows + 1),
        "outputs": Span(running.outputs, outputs),
        "output_chars": Span(running.output_chars, outputs + 1),
        "maskable": Span(running.maskable, maskable),
        "model_outputs": Span(running.model_outputs, model_outputs),
        "turns": Span(running.turns, turns),
        "after_output": Span(running.after_output, rows),
        # Keyed by what a user asked: data, never looked into.
        "questions": Plain(
            {
                key: kept
                for key, asked in running.questions.items()
                if (kept := asked[: bisect.bisect_left(asked, rows)])
            }
        ),
        "repeated": Span(running.repeated, repeated, each=list),
    }


def digest_restored(record: Mapping[str, Any], settled: object) -> FiguresDigest:
    """The digest `record` holds (`digest_record`), of the settled columns `settled`."""
    running = _Running(settled)
    running.chars, running.tokens = record["chars"], record["tokens"]
    running.outputs, running.output_chars = record["outputs"], record["output_chars"]
    running.maskable, running.model_outputs = record["maskable"], record["model_outputs"]
    running.turns, running.after_output = record["turns"], record["after_output"]
    running.questions = record["questions"]
    running.repeated = [(position, key) for position, key in record["repeated"]]
    return FiguresDigest(running, running.lengths())
