"""Versioned world-state snapshots and the goal: validation, diff, rendering, merge patches.

A snapshot maps section ids to JSON values. The known sections are `environment`,
`permissions`, `instructions`, `rules` (project rules, AGENTS.md style) and `tools`; callers may
name more. Invariants:

- Every section id matches `[A-Za-z0-9_.:-]{1,64}`, no section is null (leaving a section out of
  the snapshot is how it is removed), and every value is JSON: objects with string keys, arrays,
  strings, finite numbers, booleans. `validate_sections` returns a canonical copy, keys sorted and
  null object fields dropped (RFC 7386 reads null as "remove", so a stored snapshot cannot keep
  one); null array elements stay, arrays being replaced whole.
- Rendering is a pure function of (section, value, version): a snapshot always renders to the
  same bytes, which is what lets a provider's prompt cache survive an unchanged world state.
- A fragment is a developer message with one `input_text` part whose text is exactly
  `<world_state section="ID" version="N">` (with ` status="removed"` on a removal notice), a
  newline, the body, a newline and `</world_state>`. The goal is the same shape with
  `<goal version="N">` and `</goal>`, the goal text verbatim in between. Only developer messages
  are read as fragments, so a user quoting a marker cannot pass for one.
- `diff_world_state` sends, per section in sorted id order, what the model needs to see the new
  snapshot, judged against the baseline (what was last sent) and the fragments still visible in
  the active history:

  | section in new | fragment visible | baseline                | sent                          |
  |----------------|------------------|-------------------------|-------------------------------|
  | yes            | yes              | same value              | nothing                       |
  | yes            | yes              | other value or unknown  | new content ("changed"); for  |
  |                |                  |                         | rules with a replacement line |
  | yes            | no               | has the section         | full fragment ("resent")      |
  | yes            | no               | lacks it, or is None    | full fragment ("added")       |
  | no             | yes              | any                     | removal notice ("removed")    |
  | no             | no               | any                     | nothing                       |

  A section is visible when its latest fragment in the active history shows content (a later
  removal notice hides it), so a compacted window that lost a fragment gets it back in full.
- `apply_patch(previous, diff_world_state(previous, new, ...).patch)` equals the canonical new
  snapshot as JSON (`1`, `1.0` and `true` are three different values), and no function here
  mutates its inputs.
- `goal_text_of(render_goal(text, version=v)) == text` for every text, markers inside it included.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import json_merge_patch  # type: ignore[import-untyped]

from app.domain.assemble import Candidate, Contribution
from app.domain.errors import InvalidInput, RuleBroken
from app.domain.items import Item, developer_message, item_type, visible_text

__all__ = [
    "KNOWN_SECTIONS",
    "RULES_REMOVED_NOTICE",
    "RULES_REPLACEMENT_NOTICE",
    "Goal",
    "SectionChange",
    "Sections",
    "WorldState",
    "WorldStateUpdate",
    "apply_patch",
    "diff_world_state",
    "goal_restatement",
    "goal_text_of",
    "invariant_items",
    "render_goal",
    "render_section",
    "section_layer",
    "sections_in_history",
    "state_contributions",
    "validate_sections",
]

KNOWN_SECTIONS = ("environment", "permissions", "instructions", "rules", "tools")
Sections = Mapping[str, Any]
"""A world-state snapshot: section id -> JSON value."""

RULES_REPLACEMENT_NOTICE = "These project rules replace all earlier project rules."
RULES_REMOVED_NOTICE = "The earlier project rules no longer apply."

SECTION_ID_PATTERN = r"[A-Za-z0-9_.:-]{1,64}"
"""What a world-state section id is (the schema documents it; `validate_sections` enforces it)."""
_SECTION_ID = re.compile(SECTION_ID_PATTERN)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_FRAGMENT = re.compile(
    r'<world_state section="([A-Za-z0-9_.:-]{1,64})" version="-?\d+"( status="removed")?>\n'
    r".*\n</world_state>",
    re.DOTALL,
)
_GOAL = re.compile(r'<goal version="-?\d+">\n(.*)\n</goal>', re.DOTALL)

ChangeKind = Literal["added", "changed", "removed", "resent"]
SectionLayer = Literal["prefix", "task"]


@dataclass(frozen=True)
class Goal:
    """The session's current goal: the latest `contextd.goal` fact."""

    version: int
    text: str


@dataclass(frozen=True)
class WorldState:
    """The session's current world state, folded from its `contextd.world_state` facts."""

    version: int
    """0 before the first snapshot."""
    sections: dict[str, Any]
    baseline: dict[str, Any] | None
    """What was last sent to the model; None after a compaction (everything is re-sent)."""
    section_versions: Mapping[str, int] = field(default_factory=dict)
    """The version at which each section last changed: what its fragment names, so that an
    update to one section leaves the bytes of the others as they were."""

    def version_of(self, section: str) -> int:
        return self.section_versions.get(section, self.version)


@dataclass(frozen=True)
class SectionChange:
    section: str
    change: ChangeKind


@dataclass(frozen=True)
class WorldStateUpdate:
    updates: tuple[Item, ...]
    """Developer messages to send, in sorted section id order."""
    changes: tuple[SectionChange, ...]
    """One entry per update, in the same order."""
    patch: dict[str, Any] | None
    """RFC 7386 merge patch from the previous snapshot to the new one; None without a previous."""


@dataclass(frozen=True)
class _Scalar:
    """A number or boolean that equals another only when both have the same JSON text.

    `json_merge_patch.create_patch` skips values that compare equal with Python's `==`, under
    which `1 == 1.0 == True`; comparing JSON texts instead keeps such a change in the patch.
    """

    text: str
    value: bool | int | float = field(compare=False)


def _strict(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _strict(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_strict(inner) for inner in value]
    if isinstance(value, bool | int | float):
        return _Scalar(json.dumps(value), value)
    return value


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value with sorted keys, every `_Scalar` turned back into its value."""
    return json.loads(json.dumps(value, sort_keys=True, default=lambda scalar: scalar.value))


def _canonical(
    value: Any, *, loc: list[str | int], problems: list[dict[str, Any]], in_array: bool = False
) -> Any:
    """A canonical copy: keys sorted; a null member of an object means "absent", as in a merge
    patch, and is left out, except within an array, which a merge patch carries whole."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            problems.append({"loc": loc, "msg": "numbers must be finite (no NaN or Infinity)"})
        return value
    if isinstance(value, str):
        if _LONE_SURROGATE.search(value):
            problems.append({"loc": loc, "msg": "text must be valid Unicode (a lone surrogate)"})
        return value
    if isinstance(value, list):
        return [
            _canonical(inner, loc=[*loc, index], problems=problems, in_array=True)
            for index, inner in enumerate(value)
        ]
    if isinstance(value, Mapping):
        copy: dict[str, Any] = {}
        for key, inner in value.items():
            if not isinstance(key, str) or _LONE_SURROGATE.search(key):
                problems.append({"loc": [*loc, str(key)], "msg": "keys must be Unicode strings"})
            elif inner is not None or in_array:
                copy[key] = _canonical(inner, loc=[*loc, key], problems=problems, in_array=in_array)
        return dict(sorted(copy.items()))
    problems.append({"loc": loc, "msg": f"{type(value).__name__} is not a JSON value"})
    return None


def validate_sections(sections: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical copy of a full snapshot, or InvalidInput listing every problem in it."""
    if not isinstance(sections, Mapping):
        raise InvalidInput(
            "the world state must be an object of sections",
            details=[{"loc": ["sections"], "msg": "an object mapping section ids to JSON values"}],
        )
    problems: list[dict[str, Any]] = []
    snapshot: dict[str, Any] = {}
    for section, value in sections.items():
        loc: list[str | int] = ["sections", str(section)]
        if not isinstance(section, str) or not _SECTION_ID.fullmatch(section):
            problems.append(
                {"loc": loc, "msg": "a section id is 1 to 64 of the characters A-Z a-z 0-9 _ . : -"}
            )
        elif value is None:
            problems.append(
                {"loc": loc, "msg": "a section cannot be null; leave it out to remove it"}
            )
        else:
            snapshot[section] = _canonical(value, loc=loc, problems=problems)
    if problems:
        raise RuleBroken(
            "invalid_world_state",
            f"the world state has {len(problems)} invalid value(s)",
            details=problems,
        )
    return dict(sorted(snapshot.items()))


def _fragment_text(section: str, body: str, *, version: int, removed: bool) -> str:
    status = ' status="removed"' if removed else ""
    return f'<world_state section="{section}" version="{version}"{status}>\n{body}\n</world_state>'


def _fragment(section: str, body: str, *, version: int, removed: bool) -> Item:
    return developer_message(_fragment_text(section, body, version=version, removed=removed))


def _body(section: str, value: Any) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
    )
    if section != "rules":
        return text
    # Rules given as {"text", "directory"?} read better as prose with their scope; any other
    # shape is shown as JSON so that nothing the caller sent is hidden from the model.
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("text"), str)
        and isinstance(value.get("directory", ""), str)
        and value.keys() <= {"text", "directory"}
    ):
        directory = value.get("directory")
        scope = f" for files under {directory}" if directory else ""
        return f"Project rules{scope}:\n\n{value['text']}"
    return f"Project rules:\n\n{text}"


def _section_text(section: str, value: Any, *, version: int) -> str:
    return _fragment_text(section, _body(section, value), version=version, removed=False)


def _goal_text(text: str, *, version: int) -> str:
    return f'<goal version="{version}">\n{text}\n</goal>'


def render_section(section: str, value: Any, *, version: int) -> Item:
    """The full fragment of one section at one snapshot version."""
    return developer_message(_section_text(section, value, version=version))


RESTATED_GOAL_CHARS = 1_000
"""A goal longer than this is restated at the end by its opening (`GOAL_OPENING_CHARS`) and a
pointer to the whole: restated whole, a long task statement would be fresh input on every call,
since everything before the end of a context changes from call to call."""
GOAL_OPENING_CHARS = 400


def goal_restatement(goal: Goal) -> str | None:
    """The text that restates `goal` at the end of a context; None when it is short enough to
    restate whole. Never a goal fragment (`is_state_fragment` is false for it)."""
    if len(goal.text) <= RESTATED_GOAL_CHARS:
        return None
    opening = goal.text[:GOAL_OPENING_CHARS].rstrip()
    return (
        f'<goal version="{goal.version}" part="opening">\n{opening} …\n</goal>\n'
        "(The goal continues: it is pinned in full, verbatim, at the top of this context.)"
    )


def render_goal(text: str, *, version: int) -> Item:
    """The goal fragment; `text` is carried verbatim."""
    return developer_message(_goal_text(text, version=version))


GOAL_RESTATED_AFTER_TOKENS = 8_000
"""The goal is restated at the end once the history between it and the end holds this many
tokens: nearer the top than that it is still in view, and a restatement, which moves with the
end, would be fresh input on every call for nothing."""


def state_contributions(
    goal: Goal | None, state: WorldState, *, history_tokens: int
) -> tuple[Contribution, ...]:
    """The current goal and world state as required candidates of a session-mode assembly.

    Each fragment is rendered once, as the text a developer message carries. The goal and the
    governing sections sit in the stable prefix, verbatim; under `edges` placement (the two
    high-attention positions) the goal is also restated at the end, by its opening when it is
    long (`goal_restatement`), once `history_tokens` reach `GOAL_RESTATED_AFTER_TOKENS`. The
    environment and caller-named sections go with the task.
    """
    sections = tuple(
        Candidate(
            id=f"world_state:{section}",
            source="world_state",
            layer=section_layer(section),
            source_class="world_state",
            content=_section_text(section, value, version=state.version_of(section)),
            required=True,
        )
        for section, value in sorted(state.sections.items())
    )
    goals = (
        ()
        if goal is None
        else (
            Candidate(
                id="goal",
                source="goal",
                layer="prefix",
                source_class="goal",
                content=_goal_text(goal.text, version=goal.version),
                required=True,
                restate_at_end=history_tokens >= GOAL_RESTATED_AFTER_TOKENS,
                restatement=goal_restatement(goal),
            ),
        )
    )
    return tuple(
        Contribution(source=name, candidates=candidates)
        for name, candidates in (("goal", goals), ("world_state", sections))
        if candidates
    )


def invariant_items(goal: Goal | None, state: WorldState) -> tuple[Item, ...]:
    """The current goal and governing sections, re-anchored at the top of a compacted history."""
    goals = () if goal is None else (render_goal(goal.text, version=goal.version),)
    return goals + tuple(
        render_section(section, value, version=state.version_of(section))
        for section, value in sorted(state.sections.items())
        if section_layer(section) == "prefix"
    )


def goal_text_of(item: Item) -> str | None:
    """The verbatim goal text of a goal fragment; None for any other item."""
    if item_type(item) != "message" or item.get("role") != "developer":
        return None
    match = _GOAL.fullmatch(visible_text(item))
    return match.group(1) if match else None


def sections_in_history(items: Sequence[Item]) -> frozenset[str]:
    """The sections whose latest fragment in `items` shows content, not a removal notice."""
    visible: dict[str, bool] = {}
    for item in items:
        if item_type(item) != "message" or item.get("role") != "developer":
            continue
        match = _FRAGMENT.fullmatch(visible_text(item))
        if match:
            visible[match.group(1)] = match.group(2) is None
    return frozenset(section for section, shown in visible.items() if shown)


def is_state_fragment(item: Item) -> bool:
    """True for a world-state fragment, a removal notice or a goal fragment.

    Session-mode assembly re-renders the current goal and world state into the prefix, so
    fragments already in the history would only repeat (or contradict) them.
    """
    if item_type(item) != "message" or item.get("role") != "developer":
        return False
    text = visible_text(item)
    return bool(_FRAGMENT.fullmatch(text) or _GOAL.fullmatch(text))


def section_layer(section: str) -> SectionLayer:
    """Where a section's fragment belongs: the stable prompt prefix, or the task context."""
    return "prefix" if section in ("tools", "rules", "instructions", "permissions") else "task"


def apply_patch(snapshot: Sections, patch: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot with an RFC 7386 merge patch applied; neither input is touched."""
    # `json_merge_patch.merge` merges into its first argument and links values of the patch
    # into the result, so both go in as copies.
    merged: dict[str, Any] = json_merge_patch.merge(_json_copy(snapshot), _json_copy(patch))
    return merged


def diff_world_state(
    previous: Sections | None,
    new: Sections,
    *,
    baseline: Sections | None,
    active_history: Sequence[Item],
    version: int,
) -> WorldStateUpdate:
    """What to send for `new` (validated here), and the merge patch from `previous`.

    `baseline` is the snapshot last sent to the model (None: unknown, so everything present is
    sent); `active_history` is what the model sees now, searched for surviving fragments.
    """
    snapshot = validate_sections(new)
    visible = sections_in_history(active_history)
    updates: list[Item] = []
    changes: list[SectionChange] = []
    for section in sorted(snapshot.keys() | visible):
        if section not in snapshot:
            body = (
                RULES_REMOVED_NOTICE
                if section == "rules"
                else f'The "{section}" section was removed; its earlier content no longer applies.'
            )
            updates.append(_fragment(section, body, version=version, removed=True))
            changes.append(SectionChange(section, "removed"))
            continue
        value = snapshot[section]
        if section not in visible:
            updates.append(render_section(section, value, version=version))
            known = baseline is not None and section in baseline
            changes.append(SectionChange(section, "resent" if known else "added"))
            continue
        if (
            baseline is not None
            and section in baseline
            and _strict(baseline[section]) == _strict(value)
        ):
            continue
        body = _body(section, value)
        if section == "rules":
            body = f"{RULES_REPLACEMENT_NOTICE}\n\n{body}"
        updates.append(_fragment(section, body, version=version, removed=False))
        changes.append(SectionChange(section, "changed"))
    patch = (
        None
        if previous is None
        else _json_copy(json_merge_patch.create_patch(_strict(previous), _strict(snapshot)))
    )
    return WorldStateUpdate(updates=tuple(updates), changes=tuple(changes), patch=patch)
