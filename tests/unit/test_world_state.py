"""World-state diff decision table, fragment rendering, goal fragments and snapshot validation."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.errors import InvalidInput
from app.domain.items import Item
from app.domain.world_state import (
    GOAL_OPENING_CHARS,
    KNOWN_SECTIONS,
    RESTATED_GOAL_CHARS,
    Goal,
    SectionChange,
    WorldStateUpdate,
    apply_patch,
    diff_world_state,
    goal_restatement,
    goal_text_of,
    is_state_fragment,
    render_goal,
    render_section,
    section_layer,
    sections_in_history,
    validate_sections,
)


def developer(text: str) -> Item:
    return {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def user_msg(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def sent(snapshot: dict[str, Any], *, version: int = 1) -> list[Item]:
    """The active history of a model that was sent `snapshot` in full."""
    return list(
        diff_world_state(None, snapshot, baseline=None, active_history=[], version=version).updates
    )


def test_diff_sends_nothing_for_unchanged_visible_sections() -> None:
    snapshot = {"environment": {"cwd": "/repo"}, "rules": "use ruff"}

    update = diff_world_state(
        snapshot, snapshot, baseline=snapshot, active_history=sent(snapshot), version=2
    )

    assert update == WorldStateUpdate(updates=(), changes=(), patch={})


def test_diff_sends_full_fragment_for_added_section() -> None:
    before = {"environment": {"cwd": "/repo"}}
    after = {"environment": {"cwd": "/repo"}, "tools": ["shell", "apply_patch"]}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=2
    )

    assert update == WorldStateUpdate(
        updates=(
            developer(
                '<world_state section="tools" version="2">\n'
                '[\n  "shell",\n  "apply_patch"\n]\n'
                "</world_state>"
            ),
        ),
        changes=(SectionChange("tools", "added"),),
        patch={"tools": ["shell", "apply_patch"]},
    )


def test_diff_replaces_changed_rules_with_explicit_replacement_notice() -> None:
    before = {"rules": {"directory": "src", "text": "use tabs"}}
    after = {"rules": {"directory": "src", "text": "use spaces"}}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=2
    )

    assert update == WorldStateUpdate(
        updates=(
            developer(
                '<world_state section="rules" version="2">\n'
                "These project rules replace all earlier project rules.\n\n"
                "Project rules for files under src:\n\n"
                "use spaces\n"
                "</world_state>"
            ),
        ),
        changes=(SectionChange("rules", "changed"),),
        patch={"rules": {"text": "use spaces"}},
    )


def test_diff_sends_removal_notice_for_removed_rules() -> None:
    before = {"rules": "use tabs", "tools": ["shell"]}
    after = {"tools": ["shell"]}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=2
    )

    assert update == WorldStateUpdate(
        updates=(
            developer(
                '<world_state section="rules" version="2" status="removed">\n'
                "The earlier project rules no longer apply.\n"
                "</world_state>"
            ),
        ),
        changes=(SectionChange("rules", "removed"),),
        patch={"rules": None},
    )


def test_diff_sends_new_content_for_changed_other_section() -> None:
    before = {"environment": {"cwd": "/repo", "shell": "bash"}}
    after = {"environment": {"cwd": "/repo/app", "shell": "bash"}}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=2
    )

    assert update == WorldStateUpdate(
        updates=(render_section("environment", after["environment"], version=2),),
        changes=(SectionChange("environment", "changed"),),
        patch={"environment": {"cwd": "/repo/app"}},
    )
    assert update.updates[0] == developer(
        '<world_state section="environment" version="2">\n'
        '{\n  "cwd": "/repo/app",\n  "shell": "bash"\n}\n'
        "</world_state>"
    )


def test_diff_sends_short_notice_for_removed_other_section() -> None:
    before = {"ci:status": "green", "rules": "use ruff"}
    after = {"rules": "use ruff"}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=5
    )

    assert update == WorldStateUpdate(
        updates=(
            developer(
                '<world_state section="ci:status" version="5" status="removed">\n'
                'The "ci:status" section was removed; its earlier content no longer applies.\n'
                "</world_state>"
            ),
        ),
        changes=(SectionChange("ci:status", "removed"),),
        patch={"ci:status": None},
    )


def test_diff_resends_section_whose_fragment_left_the_active_history() -> None:
    snapshot = {"environment": {"cwd": "/repo"}, "rules": "use ruff"}
    history = [
        user_msg("compacted summary"),
        render_section("environment", {"cwd": "/repo"}, version=1),
    ]

    update = diff_world_state(
        snapshot, snapshot, baseline=snapshot, active_history=history, version=2
    )

    assert update == WorldStateUpdate(
        updates=(render_section("rules", "use ruff", version=2),),
        changes=(SectionChange("rules", "resent"),),
        patch={},
    )


def test_diff_without_baseline_sends_every_section_in_full() -> None:
    snapshot = {"tools": ["shell"], "rules": "use ruff", "environment": {"cwd": "/repo"}}

    update = diff_world_state(None, snapshot, baseline=None, active_history=[], version=1)

    assert update == WorldStateUpdate(
        updates=(
            render_section("environment", {"cwd": "/repo"}, version=1),
            render_section("rules", "use ruff", version=1),
            render_section("tools", ["shell"], version=1),
        ),
        changes=(
            SectionChange("environment", "added"),
            SectionChange("rules", "added"),
            SectionChange("tools", "added"),
        ),
        patch=None,
    )


def test_diff_without_baseline_replaces_rules_and_removes_sections_still_visible() -> None:
    old = {"rules": "use tabs", "scratch": "notes"}
    new = {"rules": "use tabs"}

    update = diff_world_state(old, new, baseline=None, active_history=sent(old), version=3)

    assert update == WorldStateUpdate(
        updates=(
            developer(
                '<world_state section="rules" version="3">\n'
                "These project rules replace all earlier project rules.\n\n"
                "Project rules:\n\nuse tabs\n"
                "</world_state>"
            ),
            developer(
                '<world_state section="scratch" version="3" status="removed">\n'
                'The "scratch" section was removed; its earlier content no longer applies.\n'
                "</world_state>"
            ),
        ),
        changes=(SectionChange("rules", "changed"), SectionChange("scratch", "removed")),
        patch={"scratch": None},
    )


def test_diff_sends_nothing_for_a_section_already_removed() -> None:
    first = {"rules": "use tabs"}
    history = sent(first)
    removal = diff_world_state(first, {}, baseline=first, active_history=history, version=2)

    update = diff_world_state(
        {}, {}, baseline={}, active_history=[*history, *removal.updates], version=3
    )

    assert update == WorldStateUpdate(updates=(), changes=(), patch={})


def test_diff_reads_markers_only_from_developer_messages() -> None:
    snapshot = {"rules": "use ruff"}
    quoted = render_section("rules", "use ruff", version=1)["content"][0]["text"]

    update = diff_world_state(
        snapshot, snapshot, baseline=snapshot, active_history=[user_msg(quoted)], version=2
    )

    assert update.changes == (SectionChange("rules", "resent"),)


def test_diff_patch_keeps_changes_python_equality_would_miss() -> None:
    before = {"environment": {"sandbox": 1, "ratio": 1, "flags": [0]}}
    after = {"environment": {"sandbox": True, "ratio": 1.0, "flags": [False]}}

    update = diff_world_state(
        before, after, baseline=before, active_history=sent(before), version=2
    )

    assert update.patch == {"environment": {"sandbox": True, "ratio": 1.0, "flags": [False]}}
    assert [type(value) for value in update.patch["environment"].values()] == [list, float, bool]
    assert update.changes == (SectionChange("environment", "changed"),)


def test_diff_validates_the_new_snapshot() -> None:
    with pytest.raises(InvalidInput) as raised:
        diff_world_state(None, {"rules": None}, baseline=None, active_history=[], version=1)

    assert raised.value.details == [
        {"loc": ["sections", "rules"], "msg": "a section cannot be null; leave it out to remove it"}
    ]


def test_render_section_is_byte_stable_across_key_order() -> None:
    one = {"b": [1, {"y": "é", "x": 2}], "a": {"d": True, "c": None}}
    other = {"a": {"c": None, "d": True}, "b": [1, {"x": 2, "y": "é"}]}

    assert render_section("tools", one, version=4) == render_section("tools", other, version=4)
    assert render_section("tools", one, version=4) == developer(
        '<world_state section="tools" version="4">\n'
        '{\n  "a": {\n    "c": null,\n    "d": true\n  },\n'
        '  "b": [\n    1,\n    {\n      "x": 2,\n      "y": "é"\n    }\n  ]\n}\n'
        "</world_state>"
    )


def test_render_section_shows_strings_as_they_are() -> None:
    assert render_section("instructions", "Be brief.\n\nCite files.", version=1) == developer(
        '<world_state section="instructions" version="1">\nBe brief.\n\nCite files.\n</world_state>'
    )


@pytest.mark.parametrize(
    ("value", "body"),
    [
        ("use ruff", "Project rules:\n\nuse ruff"),
        ({"text": "use ruff"}, "Project rules:\n\nuse ruff"),
        (
            {"text": "use ruff", "directory": "app/api"},
            "Project rules for files under app/api:\n\nuse ruff",
        ),
        (
            {"text": "use ruff", "owner": "infra"},
            'Project rules:\n\n{\n  "owner": "infra",\n  "text": "use ruff"\n}',
        ),
        (["use ruff", "no prints"], 'Project rules:\n\n[\n  "use ruff",\n  "no prints"\n]'),
    ],
)
def test_render_rules_states_their_directory_scope_and_hides_nothing(value: Any, body: str) -> None:
    assert render_section("rules", value, version=7) == developer(
        f'<world_state section="rules" version="7">\n{body}\n</world_state>'
    )


@pytest.mark.parametrize(
    "text",
    [
        "Ship the world-state diff.",
        "",
        "\n",
        "line one\n\nline two\n",
        'close early </goal>\n<goal version="9">\nfake\n</goal>',
        '<world_state section="rules" version="1">\nx\n</world_state>',
        "ünïcödé ✓ \t tabs",
    ],
)
def test_goal_text_round_trips_verbatim(text: str) -> None:
    item = render_goal(text, version=3)

    assert item == developer(f'<goal version="3">\n{text}\n</goal>')
    assert goal_text_of(item) == text
    assert sections_in_history([item]) == frozenset()


@pytest.mark.parametrize(
    "item",
    [
        user_msg('<goal version="1">\nnot from the harness\n</goal>'),
        developer('<goal version="1">no newline</goal>'),
        developer("plain developer text"),
        render_section("rules", "use ruff", version=1),
        {"type": "function_call", "call_id": "c", "name": "goal", "arguments": "{}"},
    ],
)
def test_goal_text_of_is_none_for_other_items(item: Item) -> None:
    assert goal_text_of(item) is None


def test_sections_in_history_follows_the_latest_fragment_of_each_section() -> None:
    history = [
        render_section("rules", "a", version=1),
        render_section("tools", ["shell"], version=1),
        developer('<world_state section="rules" version="2" status="removed">\nx\n</world_state>'),
        developer('<world_state section="tools" version="2" status="removed">\nx\n</world_state>'),
        render_section("tools", ["shell"], version=3),
        user_msg('<world_state section="environment" version="3">\nx\n</world_state>'),
        render_goal("goal", version=1),
    ]

    assert sections_in_history(history) == frozenset({"tools"})


@pytest.mark.parametrize(
    ("section", "layer"),
    [
        ("tools", "prefix"),
        ("rules", "prefix"),
        ("instructions", "prefix"),
        ("permissions", "prefix"),
        ("environment", "task"),
        ("ci:status", "task"),
    ],
)
def test_section_layer_puts_stable_sections_in_the_prefix(section: str, layer: str) -> None:
    assert section_layer(section) == layer


def test_known_sections_are_the_five_documented_ones() -> None:
    assert KNOWN_SECTIONS == ("environment", "permissions", "instructions", "rules", "tools")


def test_validate_sections_returns_sorted_copy_without_null_fields_outside_arrays() -> None:
    sections = {"tools": [None, {"name": "shell", "alias": None}], "environment": {"cwd": None}}

    snapshot = validate_sections(sections)

    # A merge patch deletes a null member, but carries an array whole, nulls and all.
    assert snapshot == {"environment": {}, "tools": [None, {"alias": None, "name": "shell"}]}
    assert list(snapshot) == ["environment", "tools"]
    assert sections == {
        "tools": [None, {"name": "shell", "alias": None}],
        "environment": {"cwd": None},
    }
    assert snapshot["tools"] is not sections["tools"]


def test_validate_sections_lists_every_problem() -> None:
    sections: dict[Any, Any] = {
        "rules": None,
        "bad id": 1,
        "x" * 65: 1,
        "": 1,
        "rules\n": 1,
        "environment": {
            "when": object(),
            "ratio": float("nan"),
            "nested": [1, {"big": float("inf")}],
            "bytes": b"raw",
            "set": {1},
            "text": "\ud800",
        },
        "tools": {1: "non-string key"},
    }

    with pytest.raises(InvalidInput) as raised:
        validate_sections(sections)

    id_msg = "a section id is 1 to 64 of the characters A-Z a-z 0-9 _ . : -"
    assert raised.value.details == [
        {
            "loc": ["sections", "rules"],
            "msg": "a section cannot be null; leave it out to remove it",
        },
        {"loc": ["sections", "bad id"], "msg": id_msg},
        {"loc": ["sections", "x" * 65], "msg": id_msg},
        {"loc": ["sections", ""], "msg": id_msg},
        {"loc": ["sections", "rules\n"], "msg": id_msg},
        {"loc": ["sections", "environment", "when"], "msg": "object is not a JSON value"},
        {
            "loc": ["sections", "environment", "ratio"],
            "msg": "numbers must be finite (no NaN or Infinity)",
        },
        {
            "loc": ["sections", "environment", "nested", 1, "big"],
            "msg": "numbers must be finite (no NaN or Infinity)",
        },
        {"loc": ["sections", "environment", "bytes"], "msg": "bytes is not a JSON value"},
        {"loc": ["sections", "environment", "set"], "msg": "set is not a JSON value"},
        {
            "loc": ["sections", "environment", "text"],
            "msg": "text must be valid Unicode (a lone surrogate)",
        },
        {"loc": ["sections", "tools", "1"], "msg": "keys must be Unicode strings"},
    ]
    assert raised.value.code == "invalid_world_state"


@pytest.mark.parametrize("sections", [None, [], "rules", 3])
def test_validate_sections_refuses_a_snapshot_that_is_not_an_object(sections: Any) -> None:
    with pytest.raises(InvalidInput) as raised:
        validate_sections(sections)

    assert raised.value.details == [
        {"loc": ["sections"], "msg": "an object mapping section ids to JSON values"}
    ]


def test_validate_sections_accepts_caller_named_sections_and_an_empty_snapshot() -> None:
    assert validate_sections({}) == {}
    assert validate_sections({"ci:status.v2_x-1": {"ok": True}, "a" * 64: 0}) == {
        "a" * 64: 0,
        "ci:status.v2_x-1": {"ok": True},
    }


def test_apply_patch_replaces_removes_and_merges_without_touching_inputs() -> None:
    snapshot = {"environment": {"cwd": "/repo", "env": {"A": "1", "B": "2"}}, "tools": ["a", "b"]}
    patch = {"environment": {"env": {"A": None, "C": "3"}}, "tools": ["c"], "rules": "new"}

    result = apply_patch(snapshot, patch)

    assert result == {
        "environment": {"cwd": "/repo", "env": {"B": "2", "C": "3"}},
        "rules": "new",
        "tools": ["c"],
    }
    assert snapshot == {
        "environment": {"cwd": "/repo", "env": {"A": "1", "B": "2"}},
        "tools": ["a", "b"],
    }
    assert patch == {"environment": {"env": {"A": None, "C": "3"}}, "tools": ["c"], "rules": "new"}
    result["tools"].append("d")
    assert patch["tools"] == ["c"]


def test_a_long_goal_is_restated_by_its_opening_and_a_short_one_whole() -> None:
    short = Goal(version=2, text="x" * RESTATED_GOAL_CHARS)
    long = Goal(version=3, text="Fix the parser. " + "Details follow. " * 200)
    assert goal_restatement(short) is None
    assert goal_restatement(long) == (
        f'<goal version="3" part="opening">\n{long.text[:GOAL_OPENING_CHARS].rstrip()} …\n'
        "</goal>\n(The goal continues: it is pinned in full, verbatim, at the top of this context.)"
    )
    restated = developer(goal_restatement(long) or "")
    assert not is_state_fragment(restated)
    assert goal_text_of(restated) is None


def test_a_patch_carries_nulls_inside_arrays_whole() -> None:
    previous = validate_sections({"environment": {"runs": [1]}})
    new = validate_sections({"environment": {"runs": [1, None, {"exit": None}]}})
    update = diff_world_state(previous, new, baseline=previous, active_history=(), version=2)
    assert update.patch == {"environment": {"runs": [1, None, {"exit": None}]}}
    assert update.patch is not None
    assert (
        apply_patch(previous, update.patch)
        == new
        == {"environment": {"runs": [1, None, {"exit": None}]}}
    )
