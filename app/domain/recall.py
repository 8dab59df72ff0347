"""Reading the log back: a fact's text in windows of whole lines, and a bounded search.

What a context leaves out stays in the log; this is how the model reads it again. Invariants:

- A window is an exact slice of the fact's text: the windows of one fact, paged with
  `next_from_line` / `next_from_char`, concatenate to the text byte for byte.
- Lines end at "\\n" (kept with the line); a final newline opens no new line, so "a\\n" has one
  line and "" none.
- A window holds whole lines, at most `max_lines` of them and never more than `max_tokens`
  tokens (exact, with the caller's counter). The one exception to whole lines: a single line
  too big for `max_tokens` on its own is cut at a character boundary, and the next window
  resumes inside it (`next_from_char`). Every window but the last holds at least one
  character, so paging always ends.
- A search runs RE2 (linear time in the text: no backtracking, so no pattern can make it run
  away) over UTF-8 bytes, reports at most one match per line, and stops after `max_matches`
  matches, `max_bytes` bytes given to RE2 (a byte searched twice counts twice) or a CPU bound
  the caller checks between RE2 calls, each of at most `SEARCH_BLOCK` bytes, saying which
  bound stopped it and the fact and line to resume from. Some patterns make RE2 leave its
  linear-time DFA for a slower engine; the CPU bound is what bounds those.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, assert_never

import re2

from app.domain.errors import RuleBroken, WindowPastText
from app.domain.items import CountTokens, Format

__all__ = [
    "MAX_PATTERN_LENGTH",
    "RECALL_TOOL_NAME",
    "SEARCH_BLOCK",
    "TOOLS_SOURCE_CLASS",
    "Match",
    "Search",
    "SearchStop",
    "Window",
    "compile_pattern",
    "line_count",
    "read_window",
    "recall_tool",
    "search",
    "search_output",
    "window_output",
]

MAX_PATTERN_LENGTH = 1_000
"""Characters of a pattern; RE2 compiles in time and memory bounded by it."""
_PATTERN_MEMORY = 8 << 20
"""Bytes RE2 may use for one compiled pattern (its DFA cache included)."""
_EXCERPT_CHARS = 400
"""A matching line longer than this is shown as an excerpt around the match."""


def line_count(text: str) -> int:
    """Lines of `text`: newlines, plus one for a last line without its newline."""
    return text.count("\n") + (0 if text == "" or text.endswith("\n") else 1)


@dataclass(frozen=True)
class Window:
    """One window of a fact's text. Lines are numbered from 1; `to_line` is the last line the
    window touches (`from_line - 1` for an empty window)."""

    text: str
    from_line: int
    from_char: int
    to_line: int
    total_lines: int
    tokens: int
    next_from_line: int | None
    next_from_char: int
    """Where in `next_from_line` the next window starts: 0 unless this window cut a line."""


def _line_start(text: str, line: int) -> int:
    """Offset of the first character of line `line` (1-based) of `text`."""
    position = 0
    for _ in range(line - 1):
        position = text.index("\n", position) + 1
    return position


def _longest_fitting_prefix(text: str, *, max_tokens: int, count: CountTokens) -> int:
    """The length of the longest prefix of `text` counted within `max_tokens`, at least 1.

    Probes are bounded to a prefix that cannot fit more than it holds: a token spans at least
    one character, and rarely more than a few dozen, so a huge line costs a few counts of
    a short prefix, never of the line."""
    low, high = 1, min(len(text), max_tokens * 32)
    if count(text[:high]) <= max_tokens:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if count(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle
    return low


def read_window(
    text: str,
    *,
    from_line: int,
    from_char: int = 0,
    max_lines: int,
    max_tokens: int,
    count_tokens: CountTokens,
) -> Window:
    """The window of `text` that starts at character `from_char` of line `from_line`; see the
    module docstring. `max_tokens` must leave room for any one character (the shell asks for
    at least 16). Raises `InvalidInput` for a start past the text."""
    total = line_count(text)
    if from_line > max(total, 1):
        raise WindowPastText(
            f"from_line {from_line} is past the last line ({total})",
            details=[{"loc": ["body", "from_line"], "msg": f"the text has {total} lines"}],
        )
    start = _line_start(text, from_line) if total else 0
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end + 1
    if from_char > 0 and start + from_char >= line_end:  # an empty text has no character
        raise WindowPastText(
            f"from_char {from_char} is past the end of line {from_line}",
            details=[{"loc": ["body", "from_char"], "msg": "past the end of the line"}],
        )
    start += from_char
    # Whole lines while their counts add up within the budget; the exact count of the joined
    # text is checked after, since tokens can merge across a line break.
    ends: list[int] = []
    used = 0
    position = start
    while position < len(text) and len(ends) < max_lines:
        end = text.find("\n", position)
        end = len(text) if end < 0 else end + 1
        size = count_tokens(text[position:end])
        if used + size > max_tokens:
            break
        used += size
        ends.append(end)
        position = end
    while ends and count_tokens(text[start : ends[-1]]) > max_tokens:
        ends.pop()
    if ends:
        end, next_char = ends[-1], 0
        to_line = from_line + len(ends) - 1
    elif start < len(text):
        # The line does not fit on its own: its longest prefix that does.
        cut = _longest_fitting_prefix(
            text[start:line_end], max_tokens=max_tokens, count=count_tokens
        )
        end, to_line = start + cut, from_line
        next_char = from_char + cut if start + cut < line_end else 0
    else:
        end, next_char, to_line = start, 0, from_line - 1
    window = text[start:end]
    if end >= len(text):
        next_line = None
    elif next_char:
        next_line = from_line
    else:
        next_line = to_line + 1
    return Window(
        text=window,
        from_line=from_line,
        from_char=from_char,
        to_line=to_line,
        total_lines=total,
        tokens=count_tokens(window),
        next_from_line=next_line,
        next_from_char=next_char,
    )


@dataclass(frozen=True)
class Match:
    seq: int
    line: int
    text: str
    """The matching line without its newline, or an excerpt of it around the match."""


SearchStop = Literal["max_matches", "max_scan_bytes", "max_scan_seconds"]
"""Which bound stopped a search early: the matches listed, the bytes scanned or the CPU."""


@dataclass(frozen=True)
class Search:
    matches: tuple[Match, ...]
    next_from_seq: int | None
    """The seq to resume from when a bound stopped the search early; None when the search
    covered everything given."""
    scanned_bytes: int
    next_from_line: int | None = None
    """The line of `next_from_seq` the search goes on from."""
    stopped_by: SearchStop | None = None


def compile_pattern(pattern: str) -> re2._Regexp[bytes]:
    """`pattern` compiled by RE2 for a search over UTF-8 bytes, `^` and `$` matching at line
    ends. Raises `InvalidInput` with RE2's reason for a pattern it refuses (backreferences and
    lookaround among them: they have no linear-time algorithm)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RuleBroken(
            "invalid_pattern",
            f"a pattern is at most {MAX_PATTERN_LENGTH} characters",
            details=[{"loc": ["body", "pattern"], "msg": "pattern too long"}],
        )
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _PATTERN_MEMORY
    source = pattern.encode("utf-8", "surrogatepass")
    try:
        re2.compile(source, options)  # alone first: RE2's reason then quotes the pattern as sent
        return re2.compile(b"(?m)" + source, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RuleBroken(
            "invalid_pattern",
            f"invalid pattern: {reason}",
            details=[{"loc": ["body", "pattern"], "msg": str(reason)}],
        ) from None


def _excerpt(line: bytes, start: int) -> str:
    """The line as text, or the part of it around byte `start` when it is long."""
    text = line.rstrip(b"\n").decode("utf-8", "replace")
    if len(text) <= _EXCERPT_CHARS:
        return text
    column = len(line[:start].decode("utf-8", "replace"))
    left = max(0, min(column - _EXCERPT_CHARS // 4, len(text) - _EXCERPT_CHARS))
    right = left + _EXCERPT_CHARS
    return ("…" if left else "") + text[left:right] + ("…" if right < len(text) else "")


SEARCH_BLOCK = 64 * 1024
"""Bytes one RE2 call searches at most: the search checks its bounds between calls, so a
pattern RE2 runs on its slow engine (a DFA too large for its memory) overruns the CPU bound by
one block at most."""
_BLOCK_OVERLAP = 4 * 1024
"""Within a line longer than a block, where the next block starts before the last one ended:
a match of up to this many bytes across the blocks' border is found whole."""


def search(
    pattern: re2._Regexp[bytes],
    texts: Iterable[tuple[int, str]],
    *,
    max_matches: int,
    max_bytes: int,
    from_line: int = 1,
    exhausted: Callable[[], bool] = lambda: False,
) -> Search:
    """Matches of `pattern` in `texts` ((seq, text) pairs in seq order, the first searched from
    its line `from_line`), the first match of each line, in order; see the module docstring for
    the bounds. `max_bytes` counts every byte RE2 is given to search, a byte searched twice
    twice; `exhausted` says when the CPU bound is spent (checked between RE2 calls)."""
    matches: list[Match] = []
    scanned = 0
    start_line = from_line
    for seq, text in texts:
        if len(matches) >= max_matches:
            return Search(tuple(matches), seq, scanned, start_line, "max_matches")
        data = text.encode("utf-8", "surrogatepass")
        position = _line_offset(data, start_line)
        line, counted_to = start_line, position
        start_line = 1
        while position <= len(data):
            stop: SearchStop | None = None
            if len(matches) >= max_matches:
                stop = "max_matches"
            elif scanned >= max_bytes:
                stop = "max_scan_bytes"
            elif exhausted():
                stop = "max_scan_seconds"
            if stop is not None:
                line += data.count(b"\n", counted_to, position)
                return Search(tuple(matches), seq, scanned, line, stop)
            end = min(len(data), position + SEARCH_BLOCK)
            found = pattern.search(data, position, end)
            if found is None:
                scanned += end - position
                if end >= len(data):
                    break
                # On from the start of the line the block ended in, so that a match within a
                # line crossing the block's end is found whole; within a line longer than a
                # block, from a little before the block's end.
                resume = data.rfind(b"\n", position, end) + 1
                position = resume if resume > position else end - _BLOCK_OVERLAP
                continue
            begin = found.start()
            scanned += max(found.end() - position, 1)
            line += data.count(b"\n", counted_to, begin)
            counted_to = begin
            line_start = data.rfind(b"\n", 0, begin) + 1
            line_end = data.find(b"\n", begin)
            line_end = len(data) if line_end < 0 else line_end + 1
            matches.append(
                Match(
                    seq=seq,
                    line=line,
                    text=_excerpt(data[line_start:line_end], begin - line_start),
                )
            )
            if line_end >= len(data):
                break
            # One match a line: resume at the next line, so that even a pattern matching the
            # empty string takes one step per line.
            line += data.count(b"\n", counted_to, line_end)
            counted_to = position = line_end
    return Search(tuple(matches), None, scanned)


def _line_offset(data: bytes, line: int) -> int:
    """Where line `line` (from 1) of `data` starts; past the end when it has fewer lines."""
    position = 0
    for _ in range(line - 1):
        position = data.find(b"\n", position) + 1
        if position == 0:
            return len(data) + 1
    return position


def window_output(seq: int, kind: str, window: Window) -> str:
    """A window as the recall tool's output: one line saying what it is and where the next
    one starts, then the text exactly as logged."""
    if window.total_lines == 0:
        return f"fact seq {seq} ({kind}) has no text."
    lines = (
        f"line {window.from_line}"
        if window.to_line == window.from_line
        else f"lines {window.from_line}–{window.to_line}"
    )
    if window.from_char:
        lines += f" (from character {window.from_char})"
    if window.next_from_line is None:
        more = "the end of the fact"
    elif window.next_from_char:
        more = (
            f"more: recall seq {seq} from_line {window.next_from_line}"
            f" from_char {window.next_from_char}"
        )
    else:
        more = f"more: recall seq {seq} from_line {window.next_from_line}"
    header = (
        f"fact seq {seq} ({kind}), {lines} of {window.total_lines}, {window.tokens} tokens; {more}"
    )
    return f"{header}\n{window.text}"


def search_output(pattern: str, first_seq: int, last_seq: int, found: Search) -> str:
    """A search as the recall tool's output: one line per matching line, then where to go on."""
    span = f"fact seq {first_seq}" if first_seq == last_seq else f"fact seqs {first_seq}–{last_seq}"
    if not found.matches:
        head = f"No line of {span} matches {pattern!r}."
    else:
        head = f"{len(found.matches)} matching lines for {pattern!r} in {span}:"
    lines = [head, *(f"seq {m.seq} line {m.line}: {m.text}" for m in found.matches)]
    if found.next_from_seq is not None:
        where = f"from_seq {found.next_from_seq}"
        if found.next_from_line not in (None, 1):
            where += f" from_line {found.next_from_line}"
        bound = {
            "max_matches": "the match bound",
            "max_scan_bytes": "the bytes a search may scan",
            "max_scan_seconds": "the CPU time a search may take",
            None: "a bound",
        }[found.stopped_by]
        lines.append(f"(stopped early at {bound}: search again {where} for more)")
    return "\n".join(lines)


# The recall tool, as the model is offered it. Its definition never changes within a release:
# tool definitions come first in a provider's prompt, so a changing one would empty the cache.
RECALL_TOOL_NAME = "context_recall"
TOOLS_SOURCE_CLASS = "tools"
"""The source class the tool definitions' tokens are accounted under."""
RECALL_TOOL_DESCRIPTION = (
    "Reads back a fact this context names as 'fact seq N': `seq` gives its text, in windows of"
    " lines; `pattern` (RE2) with `seq` or `from_seq`/`to_seq` lists the matching lines."
)
RECALL_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seq": {"type": "integer"},
        "from_line": {"type": "integer"},
        "from_char": {"type": "integer"},
        "pattern": {"type": "string"},
        "from_seq": {"type": "integer"},
        "to_seq": {"type": "integer"},
    },
    "additionalProperties": False,
}


def recall_tool(fmt: Format) -> dict[str, Any]:
    """The recall tool's definition in `fmt`'s request shape: a Responses function tool, a Chat
    Completions function tool, or an Anthropic tool with `input_schema`. A new object on every
    call, built from the same constants, so callers may change theirs freely."""
    parameters = copy.deepcopy(RECALL_TOOL_PARAMETERS)
    match fmt:
        case "responses":
            return {
                "type": "function",
                "name": RECALL_TOOL_NAME,
                "description": RECALL_TOOL_DESCRIPTION,
                "parameters": parameters,
                "strict": False,
            }
        case "chat":
            return {
                "type": "function",
                "function": {
                    "name": RECALL_TOOL_NAME,
                    "description": RECALL_TOOL_DESCRIPTION,
                    "parameters": parameters,
                },
            }
        case "anthropic":
            return {
                "name": RECALL_TOOL_NAME,
                "description": RECALL_TOOL_DESCRIPTION,
                "input_schema": parameters,
            }
        case _:
            assert_never(fmt)
