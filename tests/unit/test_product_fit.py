"""A compaction record fitted to its budget: `fit_product`."""

from __future__ import annotations

from dataclasses import replace

from app.domain.compaction import Summary
from app.domain.compaction.product import Product, fit_product, read_product, render_product
from app.domain.items import visible_text


def words(text: str) -> int:
    return len(text.split())


def summary(**lists: tuple[str, ...]) -> Summary:
    return Summary(
        goal=None,
        user_requests=lists.get("user_requests", ()),
        decisions=lists.get("decisions", ()),
        files=lists.get("files", ()),
        commands=lists.get("commands", ()),
        errors=lists.get("errors", ()),
        verification=lists.get("verification", ()),
        state="Tests pass now.",
        next_steps=lists.get("next_steps", ()),
        from_seq=1,
        to_seq=90,
    )


COMMANDS = tuple(f"pytest tests/test_{n}.py -x -q → exit {n % 2}" for n in range(30))
FILES = tuple(f"src/pkg/module_{n}.py" for n in range(12))
REQUESTS = ("Keep the --ascii flag working.", "Run the whole suite now.")
SUMMARY = summary(user_requests=REQUESTS, files=FILES, commands=COMMANDS)
RECORD = Product(
    kind="summary",
    goal=None,
    summary=SUMMARY,
    notes=None,
    handoff=None,
    pinned=("Never push to main.",),
    source_range=(1, 90),
    goal_pinned=True,
)


def size(product: Product) -> int:
    return words(visible_text(render_product(product)))


def test_a_record_within_its_budget_is_left_as_it_is() -> None:
    assert fit_product(RECORD, budget=size(RECORD), count=words) == RECORD


def test_the_oldest_commands_go_first_and_the_record_says_so() -> None:
    budget = size(RECORD) - 100
    fitted = fit_product(RECORD, budget=budget, count=words)

    assert fitted.summary is not None
    kept = fitted.summary.commands
    assert len(kept) < len(COMMANDS)
    assert kept == COMMANDS[-len(kept) :]
    assert fitted == replace(RECORD, summary=replace(SUMMARY, commands=kept), omitted=("commands",))
    assert size(fitted) <= budget
    # Dropping one command fewer would not have fitted: it cuts no more than it must.
    one_more = COMMANDS[-len(kept) - 1 :]
    assert size(replace(fitted, summary=replace(fitted.summary, commands=one_more))) > budget
    text = visible_text(render_product(fitted))
    assert (
        "## Shortened for space (oldest entries left out; recall them by seq)\n- commands\n"
    ) in text
    assert read_product(render_product(fitted)) == fitted


def test_the_users_words_and_the_files_go_only_when_the_bookkeeping_is_at_its_floor() -> None:
    at_floors = replace(
        RECORD,
        summary=replace(
            SUMMARY, user_requests=REQUESTS[-1:], files=FILES[-8:], commands=COMMANDS[-3:]
        ),
        omitted=("user_requests", "files", "commands"),
    )

    fitted = fit_product(RECORD, budget=size(at_floors), count=words)

    assert fitted == at_floors
    assert read_product(render_product(fitted)) == fitted


def test_a_tiny_budget_empties_the_bookkeeping_but_keeps_the_files_and_the_users_words() -> None:
    fitted = fit_product(RECORD, budget=0, count=words)

    assert fitted.summary is not None
    assert fitted.summary == replace(
        SUMMARY, user_requests=REQUESTS[-1:], files=FILES[-8:], commands=()
    )
    # The runtime's pins, the state and the goal's pointer are never cut.
    assert (fitted.pinned, fitted.summary.state, fitted.goal_pinned) == (
        RECORD.pinned,
        "Tests pass now.",
        True,
    )
    assert fitted.omitted == ("user_requests", "files", "commands")
    text = visible_text(render_product(fitted))
    assert "## Calls and outcomes" not in text
    assert "## Shortened for space (oldest entries left out; recall them by seq)\n" in text
    assert read_product(render_product(fitted)) == fitted


def test_what_an_earlier_record_left_out_stays_named() -> None:
    earlier = replace(RECORD, omitted=("commands",))

    assert fit_product(earlier, budget=size(earlier), count=words).omitted == ("commands",)
    assert read_product(render_product(earlier)) == earlier


def test_fitting_is_deterministic() -> None:
    budget = size(RECORD) // 2
    once = render_product(fit_product(RECORD, budget=budget, count=words))
    assert all(
        render_product(fit_product(RECORD, budget=budget, count=words)) == once for _ in range(3)
    )


V1_RECORD = (
    "[contextd:summary]\nEarlier work in this session (fact seqs 1–10) was compacted into this"
    " record. It is history kept for reference, not new instructions: requests quoted here are"
    " the user's own words; decisions, state and next steps are what the agent said, not"
    " verified facts. Every original item is still in the session log under its fact seq. The"
    " JSON block at the end is for the service.\n\n## Goal\nPinned verbatim at the top of this"
    " context; not repeated here.\n\n## Files touched\n- /workspace/2048.py\n\n## Commands and"
    " tool calls, with outcomes\n- mv a b → ok\n\n## State the agent last reported (the agent's"
    ' words, not verified)\nRenamed.\n\n```json\n{"contextd":"summary","version":1,"parts":'
    '["summary"],"layout":[["goal_pinned",[62]],["files",[18]],["commands",[11]],["state",[8]]],'
    '"source_range":{"from_seq":1,"to_seq":10},"summary_range":{"from_seq":1,"to_seq":10}}\n```'
)


def test_a_record_in_the_first_format_still_reads_back_and_is_rewritten_smaller() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": V1_RECORD}],
    }
    product = Product(
        kind="summary",
        goal=None,
        summary=Summary(
            goal=None,
            user_requests=(),
            decisions=(),
            files=("/workspace/2048.py",),
            commands=("mv a b → ok",),
            errors=(),
            verification=(),
            state="Renamed.",
            next_steps=(),
            from_seq=1,
            to_seq=10,
        ),
        notes=None,
        handoff=None,
        pinned=(),
        source_range=(1, 10),
        goal_pinned=True,
    )

    assert read_product(item) == product
    rewritten = visible_text(render_product(product))
    assert rewritten.endswith('```json\n{"contextd":"summary","version":2,"range":[1,10]}\n```')
    assert len(rewritten) < len(V1_RECORD) * 3 // 4
    assert read_product(render_product(product)) == product


def test_multi_line_entries_are_the_only_lengths_the_meta_gives() -> None:
    tricky = "first line\n- not an entry\n\n## Files touched\n- nor a section"
    product = replace(RECORD, summary=replace(SUMMARY, user_requests=(tricky, "one line")))

    text = visible_text(render_product(product))

    assert f'"lines":[["user_requests",0,{len(tricky)}]]' in text
    assert read_product(render_product(product)) == product
