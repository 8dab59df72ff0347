"""Head + tail truncation of tool outputs.

Invariants:

- A text that fits its budget comes back as the very same object, and costs at most one call of
  the token counter (none when its UTF-8 length already fits, since a token spans at least one
  byte).
- A truncated text is `head + marker + tail`: the head and the tail are cut on character
  boundaries (never inside a code point), the head keeps at least one character, and the marker
  says how much was omitted (`[… 1234 tokens omitted …]`, or `bytes` in byte mode) and, given a
  reference, where the whole text can be read (`[… 1234 tokens omitted; the whole output is
  fact seq 57 …]`).
- The whole truncated text, marker included, fits `max(budget, floor)` where `floor` is the size
  of the first character followed by the widest marker. The marker is inside the budget so that
  truncating again is a no-op (a truncated text already fits), and a text no larger than the
  floor is left whole because no cut could make it smaller.
- A *limit* on the content (`marks_on_top`: a history's truncation policy, an append's
  `truncation_token_limit`) is a budget of the limit plus the widest marker (and, for a list,
  the widest notice): the text kept is the limit's, and what says where the rest went comes on
  top, however long the reference it names. A text within the limit plus the marker is left
  whole, since cutting it would not make it smaller.
- In a list-form output the text parts share one running budget: parts that fit are kept, the
  first part that does not is cut to the remainder (or omitted when even a cut cannot fit), the
  rest are omitted, and one notice part (whose widest size is reserved in the budget) says how
  many were. Images and other non-text parts are kept in place.
- In token mode every size is measured with the exact counter the caller passes in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from app.domain.items import CountTokens

TruncationMode = Literal["tokens", "bytes"]

# The largest amount a marker or notice is assumed to state; sizing the floor and the reserve
# with it makes them independent of the text, which is what keeps truncation idempotent.
_WIDEST_COUNT = 999_999_999_999
# The cut search stops once the kept text is within 1/_PRECISION of the budget, or after
# _MAX_PROBES measurements, whichever comes first: the cost stays bounded on huge outputs.
_PRECISION = 64
_MAX_PROBES = 24
_TEXT_PART_TYPES = ("input_text", "output_text")


@dataclass(frozen=True)
class TruncationPolicy:
    """How much of one tool output the history keeps; `budget` adds the serialization margin."""

    mode: TruncationMode = "tokens"
    limit: int = 10_000
    serialization_margin: float = 1.2

    @property
    def budget(self) -> int:
        """`ceil(limit × margin)`, never negative."""
        # Rounding first keeps float noise (10 × 1.1 = 11.000000000000002) from adding a unit.
        return max(0, math.ceil(round(self.limit * self.serialization_margin, 9)))


def omission_marker(count: int, mode: TruncationMode, reference: str | None = None) -> str:
    """The text put where the middle of an output was cut out; `reference` names where the
    whole output is kept."""
    where = f"; the whole output is {reference}" if reference else ""
    return f"[… {count} {mode} omitted{where} …]"


def omitted_parts_notice(count: int, reference: str | None = None) -> str:
    """The text of the part appended to a list-form output whose trailing parts were dropped."""
    where = f"; the whole output is {reference}" if reference else ""
    return f"[… {count} more output parts omitted{where} …]"


def _utf8_length(text: str) -> int:
    # surrogatepass: a lone surrogate from a lenient JSON parser must not raise here.
    return len(text.encode("utf-8", "surrogatepass"))


def _measure_for(mode: TruncationMode, count_tokens: CountTokens) -> CountTokens:
    match mode:
        case "tokens":
            return count_tokens
        case "bytes":
            return _utf8_length
        case _:
            assert_never(mode)


def truncate_text(
    text: str,
    *,
    budget: int,
    mode: TruncationMode,
    count_tokens: CountTokens,
    reference: str | None = None,
    marks_on_top: bool = False,
) -> str:
    """`text` itself when it fits `budget`, else its head and tail around an omission marker.
    With `marks_on_top`, `budget` limits the text kept and the marker comes on top of it."""
    if _utf8_length(text) <= budget:
        return text
    measure = _measure_for(mode, count_tokens)
    # `content`: the most of the text's own size the cut keeps; `target`: the most it takes
    # with its marker.
    content = budget
    if marks_on_top:
        budget += measure(omission_marker(_WIDEST_COUNT, mode, reference))
    size = measure(text)
    if size <= budget or len(text) <= 1:
        return text
    target = max(budget, measure(text[:1] + omission_marker(_WIDEST_COUNT, mode, reference)))
    if size <= target:
        return text
    if not marks_on_top:
        content = target

    length = len(text)
    best: str | None = None
    # `lo` kept characters is the fallback (one head character); `hi` is known not to fit.
    lo, hi = 1, length
    aim = min(content, target - measure(omission_marker(size, mode, reference)))
    guess = length * aim // size
    for _ in range(_MAX_PROBES):
        kept_chars = min(max(guess, lo + 1), hi - 1)
        if kept_chars <= lo:
            break
        head = text[: kept_chars - kept_chars // 2]
        tail = text[length - kept_chars // 2 :]
        kept = measure(head + tail)
        candidate = f"{head}{omission_marker(max(1, size - kept), mode, reference)}{tail}"
        candidate_size = measure(candidate)
        if kept <= content and candidate_size <= target:
            lo, best = kept_chars, candidate
            if candidate_size >= target - target // _PRECISION or (
                marks_on_top and kept >= content - content // _PRECISION
            ):
                break
        else:
            hi = kept_chars
        # Scale the cut by how far this probe landed from the budget (secant step).
        aim = min(content, target - (candidate_size - kept))
        guess = kept_chars * aim // max(kept, 1)
    if best is None:
        best = f"{text[:1]}{omission_marker(max(1, size - measure(text[:1])), mode, reference)}"
    return best


def _is_text_part(part: object) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") in _TEXT_PART_TYPES
        and isinstance(part.get("text"), str)
    )


def truncate_tool_output(
    output: str | list[Any],
    *,
    budget: int,
    mode: TruncationMode,
    count_tokens: CountTokens,
    reference: str | None = None,
    marks_on_top: bool = False,
) -> str | list[Any]:
    """`output` itself when it fits `budget`, else a new, truncated output of the same form whose
    markers name `reference` when given. With `marks_on_top`, `budget` limits the text kept and
    the marker and notice come on top of it."""
    if isinstance(output, str):
        return truncate_text(
            output,
            budget=budget,
            mode=mode,
            count_tokens=count_tokens,
            reference=reference,
            marks_on_top=marks_on_top,
        )
    if sum(_utf8_length(part["text"]) for part in output if _is_text_part(part)) <= budget:
        return output
    measure = _measure_for(mode, count_tokens)
    sizes = [measure(part["text"]) if _is_text_part(part) else 0 for part in output]
    reserve = measure(omitted_parts_notice(_WIDEST_COUNT, reference))
    # With the marks on top, the part cut keeps the limit's remainder of text, its marker on top.
    marker = measure(omission_marker(_WIDEST_COUNT, mode, reference)) if marks_on_top else 0
    if marks_on_top:
        budget += reserve + marker
    target = max(budget, reserve)
    if sum(sizes) <= target:
        return output

    remaining = target - reserve
    kept: list[Any] = []
    omitted = 0
    exhausted = False
    for part, size in zip(output, sizes, strict=True):
        if not _is_text_part(part):
            kept.append(part)
        elif exhausted:
            omitted += 1
        elif size <= remaining:
            kept.append(part)
            remaining -= size
        else:
            exhausted = True
            cut = truncate_text(
                part["text"],
                budget=remaining - marker,
                mode=mode,
                count_tokens=count_tokens,
                reference=reference,
                marks_on_top=marks_on_top,
            )
            # Below its floor a part cannot be cut to fit; dropping it keeps the output in budget.
            if cut is not part["text"] and measure(cut) <= remaining:
                kept.append({**part, "text": cut})
            else:
                omitted += 1
    if omitted:
        kept.append({"type": "input_text", "text": omitted_parts_notice(omitted, reference)})
    return kept


MIN_OUTPUT_TOKENS = 64
"""The least a tool output shrunk by `shrink_outputs` keeps, marker included."""


def shrink_outputs(
    outputs: Sequence[tuple[str | list[Any], int, str | None]],
    *,
    budget: int,
    count_tokens: CountTokens,
) -> list[str | list[Any]] | None:
    """Tool outputs, given as (output, tokens, reference), truncated head and tail in exact
    tokens so that together they fit `budget`, each sharing it in proportion to its size and
    naming its reference; None when `budget` cannot give each at least `MIN_OUTPUT_TOKENS`."""
    if budget < MIN_OUTPUT_TOKENS * len(outputs):
        return None
    whole = max(sum(tokens for _, tokens, _ in outputs), 1)
    return [
        truncate_tool_output(
            output,
            budget=budget * tokens // whole,
            mode="tokens",
            count_tokens=count_tokens,
            reference=reference,
        )
        for output, tokens, reference in outputs
    ]
