"""The recall core's invariants, for any text: windows page back to the text byte for byte,
each within its bounds; a search reports the first match of each line, in order."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.recall import compile_pattern, line_count, read_window, search
from app.tokens import token_counter

count = token_counter("o200k_base")
texts = st.text(st.sampled_from(list("ab \n{}é😀\t.x")), max_size=400)


@settings(max_examples=200, deadline=None)
@given(text=texts, max_lines=st.integers(1, 6), max_tokens=st.integers(16, 60))
def test_windows_page_back_to_the_text(text: str, max_lines: int, max_tokens: int) -> None:
    pages = [
        read_window(
            text, from_line=1, max_lines=max_lines, max_tokens=max_tokens, count_tokens=count
        )
    ]
    while pages[-1].next_from_line is not None:
        last = pages[-1]
        assert last.text  # every window but the last makes progress
        pages.append(
            read_window(
                text,
                from_line=last.next_from_line or 0,
                from_char=last.next_from_char,
                max_lines=max_lines,
                max_tokens=max_tokens,
                count_tokens=count,
            )
        )
    assert "".join(page.text for page in pages) == text
    for page in pages:
        assert page.tokens == count(page.text) <= max_tokens
        assert page.total_lines == line_count(text)
        # Whole lines unless the window starts or ends inside one line too big for the bound.
        whole = page.text.count("\n") + (0 if page.text.endswith("\n") or not page.text else 1)
        assert whole <= max_lines


def test_line_count_ignores_a_final_newline() -> None:
    assert [line_count(t) for t in ("", "a", "a\n", "a\nb", "\n\n")] == [0, 1, 1, 2, 2]


@settings(max_examples=200, deadline=None)
@given(text=texts, needle=st.sampled_from(["a", "b+", "^x", "é$", r"\d"]))
def test_a_search_finds_the_first_match_of_each_line(text: str, needle: str) -> None:
    found = search(compile_pattern(needle), [(7, text)], max_matches=1000, max_bytes=1 << 20)
    expected = [
        number for number, line in enumerate(text.split("\n"), start=1) if re.search(needle, line)
    ]
    assert [m.line for m in found.matches] == expected
    assert {m.seq for m in found.matches} <= {7}
    assert found.next_from_seq is None


def test_the_bounds_say_where_to_go_on() -> None:
    pattern = compile_pattern("hit")
    texts = [(1, "hit\nhit\nhit"), (2, "hit"), (3, "hit")]
    by_matches = search(pattern, texts, max_matches=2, max_bytes=1 << 20)
    assert [(m.seq, m.line) for m in by_matches.matches] == [(1, 1), (1, 2)]
    assert by_matches.next_from_seq == 1
    by_bytes = search(pattern, texts, max_matches=100, max_bytes=12)
    assert [(m.seq, m.line) for m in by_bytes.matches] == [(1, 1), (1, 2), (1, 3), (2, 1)]
    assert by_bytes.next_from_seq == 3
