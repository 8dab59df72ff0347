"""Next-action grounding: the identifiers of a text, what a call needed, what its context held."""

from __future__ import annotations

from app.domain.grounding import (
    Grounding,
    extract_identifiers,
    ground,
    item_text,
    names_every_seq,
    needed_identifiers,
)


def test_extract_identifiers_finds_every_kind_stripped_and_at_least_four_long() -> None:
    text = (
        "Edit /tmp/tmpw6sk2trg/src/math_utils.py and see setup.cfg, a/b, docs/.\n"
        "from django.db.models import UniqueConstraint; self.assertEqual(x, y) e.g. i.e.\n"
        "call get_user_name or getUserName, not TODO, ____ nor foo; run v1.2.3 on port 8080 "
        "(task 123, sha256 a1b2c3d4e5, --dry-run-/)"
    )

    assert extract_identifiers(text) == frozenset(
        {
            # paths, and the bare file names and dotted names inside them
            "tmp/tmpw6sk2trg/src/math_utils.py",
            "math_utils.py",
            "setup.cfg",
            # snake_case (the stem of a file name too)
            "math_utils",
            "get_user_name",
            # camelCase and PascalCase
            "UniqueConstraint",
            "assertEqual",
            "getUserName",
            # dotted names, from their first part
            "django.db.models",
            "self.assertEqual",
            "v1.2.3",
            # codes
            "tmpw6sk2trg",
            "sha256",
            "a1b2c3d4e5",
            # numbers of four digits or more
            "8080",
        }
    )


def test_extract_identifiers_reads_string_escapes_as_separators() -> None:
    arguments = r'{"command": "cat <<EOF > fix.py\nimport sys\nsys.path.insert(0, \"src\")\nEOF"}'

    assert extract_identifiers(arguments) == frozenset({"fix.py", "sys.path.insert"})


def test_item_text_walks_every_string_but_transport_and_opaque_fields() -> None:
    call = {"type": "function_call", "call_id": "call_9f8e7d6c5b", "name": "shell", "id": "fc_1"}
    reasoning = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "look at parse_args"}],
        "encrypted_content": "gAAAAB3x9",
        "status": "completed",
    }

    assert item_text([{**call, "arguments": '{"cmd": "ls"}'}, reasoning]) == (
        'shell\n{"cmd": "ls"}\nlook at parse_args'
    )


def test_needed_identifiers_are_in_the_history_and_not_the_goal() -> None:
    goal = "Fix the crash in src/app/parser.py when parse_args gets an empty list"
    history = (
        "src/app/parser.py:12: def parse_args(argv):\n"
        "src/app/cli.py calls parser.parse_args and load_config_file"
    )
    action = "edit src/app/parser.py and src/app/cli.py, call load_config_file, then new_helper"

    # parser.py is a substring of the goal; new_helper is not in the history.
    assert needed_identifiers(action, history=history, goal=goal) == frozenset(
        {"src/app/cli.py", "cli.py", "load_config_file"}
    )


def test_ground_splits_needed_into_visible_and_recallable_from_the_first_elided_fact() -> None:
    needed = frozenset({"cli.py", "load_config_file", "ERR_4012", "lost_name"})

    grounding = ground(
        needed,
        shown="[fact seqs 3–9 cleared] edit cli.py",
        elided=["old output: ERR_4012", "load_config_file and ERR_4012"],
    )

    assert grounding == Grounding(
        needed=needed,
        visible=frozenset({"cli.py"}),
        recallable={"ERR_4012": 0, "load_config_file": 1},
    )
    assert not grounding.is_all_visible


def test_names_every_seq_wants_each_first_seq_named_as_a_whole_number() -> None:
    shown = "fact seqs 12–40 were cleared; fact seq 57 was truncated"

    assert names_every_seq(shown, [12, 57])
    assert not names_every_seq(shown, [12, 5])
    assert not names_every_seq(shown, [4])
