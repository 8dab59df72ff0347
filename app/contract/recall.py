"""The recall router's models: a window of one fact, or a search of one fact or a seq
range. Field names are the contract."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.contract.common import MAX_SEQ, WHOLE_NUMBER, RequestModel, given
from app.domain.recall import MAX_PATTERN_LENGTH, SearchStop

Seq = Annotated[int, Field(ge=1, le=MAX_SEQ), WHOLE_NUMBER]
Bound = Annotated[int, Field(ge=1, le=10**9), WHOLE_NUMBER]


class RecallRequest(RequestModel):
    """One fact in a window (`seq`), or a search (`pattern`) of one fact or a seq range. The
    schema states which fields go together; `from_seq` after `to_seq` it cannot."""

    model_config = ConfigDict(
        json_schema_extra={
            "if": given("seq"),
            "then": {"not": {"anyOf": [given("from_seq"), given("to_seq")]}},
            "else": {"allOf": [given("pattern"), {"anyOf": [given("from_seq"), given("to_seq")]}]},
        }
    )

    seq: Seq | None = Field(default=None, description="The fact to read (or to search).")
    from_line: Annotated[int, Field(ge=1, le=MAX_SEQ), WHOLE_NUMBER] = Field(
        default=1,
        description="First line of the window, counted from 1; for a search, the line of its "
        "first fact it starts at (a stopped search's `next_from_line`).",
    )
    from_char: Annotated[int, Field(ge=0, le=MAX_SEQ), WHOLE_NUMBER] = Field(
        default=0,
        description="Where in `from_line` the window starts: 0 unless paging through a line "
        "longer than `max_tokens` (the previous answer's `next_from_char`).",
    )
    max_lines: Bound = Field(default=200, description="Lines in the window, capped by the service.")
    max_tokens: Annotated[int, Field(ge=16, le=10**9), WHOLE_NUMBER] = Field(
        default=2000,
        description="Tokens in the window (exact, session encoding), capped by the service.",
    )
    pattern: Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_LENGTH)] | None = Field(
        default=None,
        description="An RE2 regular expression (no backreferences or lookaround); `^` and `$` "
        "match at line ends. With it, the answer lists matching lines instead of a window.",
    )
    from_seq: Seq | None = Field(default=None, description="First fact a search covers.")
    to_seq: Seq | None = Field(default=None, description="Last fact a search covers.")
    max_matches: Bound = Field(
        default=50, description="Matching lines listed, capped by the service."
    )

    @model_validator(mode="after")
    def _one_target(self) -> RecallRequest:
        ranged = self.from_seq is not None or self.to_seq is not None
        if self.seq is not None and ranged:
            raise ValueError("give `seq`, or `from_seq`/`to_seq` with a `pattern`, not both")
        if self.seq is None and not ranged:
            raise ValueError("give `seq` (one fact) or `from_seq`/`to_seq` (a search)")
        if ranged and self.pattern is None:
            raise ValueError("a seq range is searched: give a `pattern`")
        if self.from_seq is not None and self.to_seq is not None and self.from_seq > self.to_seq:
            raise PydanticCustomError(
                "seq_range_reversed",
                "from_seq ({from_seq}) is after to_seq ({to_seq})",
                {"from_seq": self.from_seq, "to_seq": self.to_seq},
            )
        return self


class RecallMatchBody(BaseModel):
    seq: int
    line: int = Field(description="Line number in the fact's text, counted from 1.")
    text: str = Field(description="The matching line, or an excerpt around the match.")


class RecallResponse(BaseModel):
    seq: int | None = Field(description="The fact read or searched; null for a range search.")
    type: str | None = Field(description="That fact's type.")
    text: str | None = Field(
        description="The window: the fact's text exactly as logged, whole lines; null for a search."
    )
    from_line: int | None
    from_char: int | None
    to_line: int | None
    total_lines: int | None
    tokens: int | None = Field(description="Exact tokens of `text` in the session's encoding.")
    next_from_line: int | None = Field(
        description="Where the next window starts, or the line of `next_from_seq` a stopped "
        "search goes on from; null at the end."
    )
    next_from_char: int | None
    matches: list[RecallMatchBody]
    from_seq: int | None = Field(description="First fact the search covered.")
    to_seq: int | None = Field(description="Last fact the search covered.")
    next_from_seq: int | None = Field(
        description="Where a search stopped by a bound goes on (null: it covered the range)."
    )
    stopped_by: SearchStop | None = Field(
        default=None,
        description="The bound that stopped a search early: `max_matches`, `max_scan_bytes` "
        "(the bytes given to the pattern, a byte searched twice counting twice) or "
        "`max_scan_seconds` (the CPU time it may take; a pattern RE2 can only run on its "
        "slower engine meets it first); null when it covered the range, and for a window.",
    )
    scanned_bytes: int | None = Field(
        default=None, description="The bytes a search gave its pattern; null for a window."
    )
    max_scan_bytes: int | None = Field(
        default=None, description="The byte bound a search ran under; null for a window."
    )
    max_scan_seconds: float | None = Field(
        default=None, description="The CPU bound a search ran under; null for a window."
    )
    max_lines: int = Field(description="The line bound applied (the request's, capped).")
    max_tokens: int = Field(description="The token bound applied (the request's, capped).")
    max_matches: int = Field(description="The match bound applied (the request's, capped).")
    tool_output: str = Field(
        description="The answer as the recall tool's output for the model: a header line "
        "naming the fact(s) and where to go on, then the window or the matching lines."
    )
