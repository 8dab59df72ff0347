"""The name trail of a compaction record: ranked, budgeted, carried across compactions."""

from __future__ import annotations

from app.domain.compaction import CompactionInput, CompactionParams, plan_compaction
from app.domain.compaction.model import Trail
from app.domain.compaction.product import read_product, render_product
from app.domain.compaction.trail import build_trail, name_uses, read_trail, trail_entries
from app.domain.history import HistoryEntry
from app.domain.items import visible_text
from tests.builders import assistant_msg, tool_call, tool_output, user_msg


def words(text: str) -> int:
    return len(text.split())


def entries(*items: dict[str, object]) -> tuple[HistoryEntry, ...]:
    return tuple(HistoryEntry(seq, item) for seq, item in enumerate(items, start=1))


PAGE = " ok" * 200  # what makes an output worth compacting

COVERED = entries(
    user_msg("Fix the parser."),
    tool_call("c1", "bash", '{"command": "grep -n parse_header src/http/parser.py"}'),
    tool_output("c1", "12: def parse_header(raw_bytes):\n40: if size > MAX_HEADER_SIZE:" + PAGE),
    assistant_msg("parse_header calls read_chunk; HeaderError comes from there."),
    tool_call("c2", "bash", '{"command": "sed -n 1,60p src/http/parser.py"}'),
    tool_output("c2", "MAX_HEADER_SIZE = 8192\ndef read_chunk(s):\n raise HeaderError()" + PAGE),
    assistant_msg("I will change read_chunk to check stream.pos_marker first."),
)


def test_names_the_agent_used_come_first_by_use_then_recency_then_what_outputs_repeat() -> None:
    trail = build_trail(
        name_uses(COVERED, None), previous=None, shown="", budget=1_000, count=words
    )

    assert trail == Trail(
        groups=(
            # Names only tool outputs showed rank last, and fit: the one two outputs showed,
            # and those one did (the parameter names `raw_bytes`, and the size `8192`).
            (3, ("raw_bytes",)),
            (4, ("HeaderError", "parse_header")),
            (5, ("src/http/parser.py",)),
            (6, ("8192", "MAX_HEADER_SIZE")),
            (7, ("read_chunk", "stream.pos_marker")),
        ),
        left_out=None,
    )


def test_what_the_budget_leaves_out_is_named_by_the_seqs_of_its_last_use() -> None:
    # Room for two names: of those the agent used twice, the newest, the longest on a tie.
    budget = words(" read_chunk,") + words(" src/http/parser.py,") + 10
    trail = build_trail(
        name_uses(COVERED, None), previous=None, shown="", budget=budget, count=words
    )

    assert trail == Trail(
        groups=((5, ("src/http/parser.py",)), (7, ("read_chunk",))), left_out=(3, 7)
    )
    assert trail_entries(trail) == (
        "seq 5: src/http/parser.py",
        "seq 7: read_chunk",
        "left out for space: names last used in fact seqs 3–7",
    )


def test_names_the_record_already_shows_or_another_name_contains_are_not_repeated() -> None:
    shown = "## Files touched\n- src/http/parser.py"
    trail = build_trail(
        name_uses(COVERED, None), previous=None, shown=shown, budget=1_000, count=words
    )

    assert "src/http/parser.py" not in trail.names
    assert "parser.py" not in trail.names  # in the path the record shows
    assert "stream.pos_marker" in trail.names
    assert "pos_marker" not in trail.names  # contained in stream.pos_marker


def test_the_trail_reads_back_exactly_and_refuses_what_it_did_not_write() -> None:
    trail = Trail(groups=((3, ("a_b", "x.y.z")), (9, ("CamelCase",))), left_out=(1, 2))

    assert read_trail(trail_entries(trail)) == trail
    assert read_trail(["seq 3: a_b", "something else"]) is None


def test_a_second_compaction_carries_the_first_records_names_with_their_seqs() -> None:
    later = (
        assistant_msg("ChunkReader wraps it."),
        tool_call("c3", "bash", '{"command": "pytest tests/test_parser.py -x"}'),
        tool_output("c3", "1 passed"),
        assistant_msg("The fix in read_chunk holds; next I check test_parser.py again."),
        tool_call("c4", "bash", '{"command": "git diff"}'),
        tool_output("c4", "diff --git a/src/http/parser.py" + PAGE),
        assistant_msg("Done."),
    )
    history = entries(*(entry.item for entry in COVERED), *later)
    params = CompactionParams(keep_recent=1, target_tokens=300)

    def compact(entries: tuple[HistoryEntry, ...]) -> tuple[HistoryEntry, ...]:
        inp = CompactionInput(
            history=entries, strategy="summary", params=params, goal="Fix the parser."
        )
        return plan_compaction(inp, count_tokens=words).history

    first = compact(history[:7])
    first_record = read_product(first[0].item)
    assert first_record is not None
    # What the agent said last is the record's state; the trail holds the rest.
    assert first_record.trail == Trail(
        groups=((3, ("raw_bytes",)), (6, ("8192", "MAX_HEADER_SIZE")))
    )

    second = compact(first + history[7:])
    record = read_product(second[0].item)

    assert record is not None
    # The first record's names keep the seqs of their last use; the new range adds its own.
    assert record.trail == Trail(
        groups=(
            (3, ("raw_bytes",)),
            (6, ("8192", "MAX_HEADER_SIZE")),
            (8, ("ChunkReader",)),
            (13, ("a/src/http/parser.py",)),
        )
    )
    # The same input gives the same record, byte for byte, and it reads back exactly.
    assert compact(first + history[7:]) == second
    assert read_product(render_product(record)) == record
    assert "- seq 6: 8192, MAX_HEADER_SIZE\n- seq 8: ChunkReader\n" in visible_text(second[0].item)
