"""Head + tail truncation of tool outputs, measured with small deterministic counters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.domain.truncation import (
    TruncationMode,
    TruncationPolicy,
    omission_marker,
    omitted_parts_notice,
    truncate_text,
    truncate_tool_output,
)

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def quarter_bytes(text: str) -> int:
    """A stand-in tokenizer: one token per started four UTF-8 bytes."""
    return (len(text.encode()) + 3) // 4


def words(text: str) -> int:
    """A stand-in tokenizer that is not proportional to length: one token per word."""
    return len(text.split())


def recording(counter: Callable[[str], int]) -> tuple[Callable[[str], int], list[str]]:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return counter(text)

    return count, calls


def text_part(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def image_part(url: str = "data:image/png;base64,AAAA") -> dict[str, Any]:
    return {"type": "input_image", "image_url": url}


@pytest.mark.parametrize(
    ("policy", "budget"),
    [
        (TruncationPolicy(), 12_000),
        (TruncationPolicy(limit=7), 9),
        (TruncationPolicy(limit=10, serialization_margin=1.1), 11),
        (TruncationPolicy(mode="bytes", limit=100), 120),
        (TruncationPolicy(limit=-5), 0),
    ],
)
def test_policy_budget_is_limit_times_margin_rounded_up(
    policy: TruncationPolicy, budget: int
) -> None:
    assert policy.budget == budget


def test_truncate_text_returns_fitting_text_itself_without_counting_when_bytes_fit() -> None:
    count, calls = recording(quarter_bytes)
    text = "short output"
    assert truncate_text(text, budget=12, mode="tokens", count_tokens=count) is text
    assert calls == []


def test_truncate_text_counts_once_when_text_fits_in_tokens_but_not_in_bytes() -> None:
    count, calls = recording(quarter_bytes)
    text = ALPHABET * 4
    assert truncate_text(text, budget=26, mode="tokens", count_tokens=count) is text
    assert calls == [text]


def test_truncate_text_keeps_head_and_tail_around_token_marker() -> None:
    text = ALPHABET * 4  # 104 bytes, 26 tokens
    cut = truncate_text(text, budget=12, mode="tokens", count_tokens=quarter_bytes)
    assert cut == "abcdefghij[… 21 tokens omitted …]qrstuvwxyz"
    assert quarter_bytes(cut) <= 12


def test_truncate_text_fits_budget_with_a_counter_not_proportional_to_length() -> None:
    cut = truncate_text("word " * 200, budget=16, mode="tokens", count_tokens=words)
    assert (
        cut
        == "word word word word word word [… 188 tokens omitted …]word word word word word word "
    )
    assert words(cut) <= 16


def test_truncate_text_in_byte_mode_states_omitted_bytes() -> None:
    cut = truncate_text(ALPHABET * 4, budget=40, mode="bytes", count_tokens=quarter_bytes)
    assert cut == "abcdefg[… 90 bytes omitted …]tuvwxyz"
    assert len(cut.encode()) == 40


def test_truncate_text_in_byte_mode_never_splits_a_character() -> None:
    cut = truncate_text("😀" * 20, budget=45, mode="bytes", count_tokens=quarter_bytes)
    assert cut == "😀😀[… 64 bytes omitted …]😀😀"
    assert len(cut.encode()) <= 45


def test_truncate_text_fits_the_marker_floor_when_budget_is_below_it() -> None:
    cut = truncate_text("0123456789" * 100, budget=3, mode="tokens", count_tokens=quarter_bytes)
    assert cut == "012345[… 247 tokens omitted …]456789"
    assert quarter_bytes(cut) == quarter_bytes("0" + omission_marker(999_999_999_999, "tokens"))


def test_truncate_text_leaves_text_no_larger_than_a_marker_whole() -> None:
    text = "0123456789" * 3  # 8 tokens: cutting it could not make it smaller
    assert truncate_text(text, budget=3, mode="tokens", count_tokens=quarter_bytes) is text


@pytest.mark.parametrize("budget", [0, 1, 5, 12, 40, 200])
@pytest.mark.parametrize("mode", ["tokens", "bytes"])
def test_truncate_text_again_changes_nothing(budget: int, mode: TruncationMode) -> None:
    text = "line of output 😀 ünïcode\n" * 40
    once = truncate_text(text, budget=budget, mode=mode, count_tokens=quarter_bytes)
    twice = truncate_text(once, budget=budget, mode=mode, count_tokens=quarter_bytes)
    assert once != text
    assert twice is once


def test_truncate_text_bounds_the_number_of_counts_on_a_huge_output() -> None:
    count, calls = recording(quarter_bytes)
    cut = truncate_text("x" * 1_000_000, budget=12_000, mode="tokens", count_tokens=count)
    assert quarter_bytes(cut) <= 12_000
    assert quarter_bytes(cut) >= 12_000 - 12_000 // 64
    assert len(calls) <= 1 + 1 + 1 + 2 * 24


def test_truncate_tool_output_returns_fitting_list_itself() -> None:
    output = [text_part("a" * 40), image_part(), text_part("b" * 80)]
    assert truncate_tool_output(output, budget=30, mode="tokens", count_tokens=quarter_bytes) is (
        output
    )


def test_truncate_tool_output_trims_parts_with_a_running_budget() -> None:
    output = [text_part("a" * 40), image_part(), text_part("b" * 80), text_part("c" * 40)]
    assert truncate_tool_output(output, budget=35, mode="tokens", count_tokens=quarter_bytes) == [
        text_part("a" * 40),
        image_part(),
        text_part("bbbbbbbbbbbb[… 14 tokens omitted …]bbbbbbbbbbbb"),
        text_part("[… 1 more output parts omitted …]"),
    ]


def test_truncate_tool_output_omits_a_part_that_cannot_be_cut_to_the_remainder() -> None:
    output = [text_part("a" * 40), image_part(), text_part("b" * 80), text_part("c" * 40)]
    assert truncate_tool_output(output, budget=25, mode="tokens", count_tokens=quarter_bytes) == [
        text_part("a" * 40),
        image_part(),
        text_part(omitted_parts_notice(2)),
    ]


def test_truncate_tool_output_in_byte_mode_keeps_images_in_place() -> None:
    output = [image_part("first"), text_part("a" * 40), image_part("second"), text_part("b" * 200)]
    assert truncate_tool_output(output, budget=130, mode="bytes", count_tokens=quarter_bytes) == [
        image_part("first"),
        text_part("a" * 40),
        image_part("second"),
        text_part("bbbbbbbb[… 185 bytes omitted …]bbbbbbb"),
    ]


def test_truncate_tool_output_never_leaves_an_empty_list() -> None:
    output = [text_part("z" * 400)]
    assert truncate_tool_output(output, budget=0, mode="tokens", count_tokens=quarter_bytes) == [
        text_part(omitted_parts_notice(1))
    ]


def test_truncate_tool_output_passes_unknown_parts_through() -> None:
    output: list[Any] = [
        "bare string",
        {"type": "mystery", "text": "m" * 400},
        text_part("t" * 400),
    ]
    assert truncate_tool_output(output, budget=40, mode="tokens", count_tokens=quarter_bytes) == [
        "bare string",
        {"type": "mystery", "text": "m" * 400},
        text_part(f"{'t' * 42}[… 79 tokens omitted …]{'t' * 42}"),
    ]


@pytest.mark.parametrize("budget", [0, 10, 25, 35, 60])
def test_truncate_tool_output_again_changes_nothing(budget: int) -> None:
    output = [text_part("a" * 40), image_part(), text_part("b" * 80), text_part("c" * 40)]
    once = truncate_tool_output(output, budget=budget, mode="tokens", count_tokens=quarter_bytes)
    twice = truncate_tool_output(once, budget=budget, mode="tokens", count_tokens=quarter_bytes)
    assert twice is once


@pytest.mark.parametrize("limit", [1, 5, 16, 40, 200])
@pytest.mark.parametrize("mode", ["tokens", "bytes"])
@pytest.mark.parametrize("reference", [None, "fact seq 1234567"])
def test_a_limit_with_the_marks_on_top_bounds_the_text_kept_not_the_marker(
    limit: int, mode: TruncationMode, reference: str | None
) -> None:
    """Issue 43: a per-item limit of 16 kept 13 bytes, its marker counted inside it. The text
    kept is the limit's (within the search's precision), its marker on top; again, a no-op."""
    text = "line of output 😀 ünïcode\n" * 40
    measure = quarter_bytes if mode == "tokens" else (lambda t: len(t.encode()))
    once = truncate_text(
        text,
        budget=limit,
        mode=mode,
        count_tokens=quarter_bytes,
        reference=reference,
        marks_on_top=True,
    )
    head, marker_and_tail = once.split("[…", 1)
    marker, tail = marker_and_tail.split("…]", 1)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert marker == omission_marker(measure(text) - measure(head + tail), mode, reference)[2:-2]
    assert limit - limit // 64 - 1 <= measure(head + tail) <= limit
    again = truncate_text(
        once,
        budget=limit,
        mode=mode,
        count_tokens=quarter_bytes,
        reference=reference,
        marks_on_top=True,
    )
    assert again is once


def test_a_list_with_the_marks_on_top_keeps_the_limit_of_text_and_says_what_went() -> None:
    output = [text_part("a" * 40), image_part(), text_part("b" * 400), text_part("c" * 40)]
    cut = truncate_tool_output(
        output, budget=25, mode="tokens", count_tokens=quarter_bytes, marks_on_top=True
    )
    # 10 tokens of the first part, the 15 left of the second, then a notice for the third.
    assert cut == [
        text_part("a" * 40),
        image_part(),
        text_part(f"{'b' * 30}[… 85 tokens omitted …]{'b' * 30}"),
        text_part(omitted_parts_notice(1)),
    ]
    again = truncate_tool_output(
        cut, budget=25, mode="tokens", count_tokens=quarter_bytes, marks_on_top=True
    )
    assert again is cut
