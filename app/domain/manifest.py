"""The load manifest: one versioned document per tenant and name listing what every model call
loads by default, with role views over it.

Invariants:
- Entry ids are unique; `links` name existing entries and never form a cycle; every id in a
  role view and in `priorities` names an entry. `validate_manifest` raises `InvalidInput`
  listing every problem otherwise.
- A role's view is computed from the one manifest (never copied): the entries it includes
  (all when `include` is absent), minus `exclude`, plus everything they link to, transitively,
  filtered by environment.
- A view is ordered by the explicit `priorities` list (earlier wins), then by id, so the same
  manifest, role and environment always give the same entries in the same order: the required
  prefix built from it is byte-identical between calls.
- `rule` entries become required prefix candidates (verbatim). `source` entries become
  ordinary task candidates offered by their index line when they have one: index entries come
  before bodies, which stay behind their locator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain.assemble import Candidate, Contribution
from app.domain.errors import RoleNotInManifest, RuleBroken

EntryKind = Literal["rule", "source"]


@dataclass(frozen=True)
class ManifestEntry:
    id: str
    kind: EntryKind
    content: str
    index: str | None = None
    locator: str | None = None
    links: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    """Environments the entry applies to; empty means every environment."""


@dataclass(frozen=True)
class RoleView:
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Manifest:
    entries: tuple[ManifestEntry, ...]
    roles: Mapping[str, RoleView]
    priorities: tuple[str, ...] = ()


def manifest_from_document(document: Mapping[str, Any]) -> Manifest:
    """The manifest a stored (or posted) document describes, validated (`validate_manifest`).
    The document has the wire shape: `entries`, optional `roles` and `priorities`."""
    return validate_manifest(
        Manifest(
            entries=tuple(
                ManifestEntry(
                    id=entry["id"],
                    kind=entry.get("kind", "rule"),
                    content=entry["content"],
                    index=entry.get("index"),
                    locator=entry.get("locator"),
                    links=tuple(entry.get("links", ())),
                    environments=tuple(entry.get("environments", ())),
                )
                for entry in document["entries"]
            ),
            roles={
                role: RoleView(
                    include=None if view.get("include") is None else tuple(view["include"]),
                    exclude=tuple(view.get("exclude", ())),
                )
                for role, view in document.get("roles", {}).items()
            },
            priorities=tuple(document.get("priorities", ())),
        )
    )


def _find_cycle(entries: Mapping[str, ManifestEntry]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(entry_id: str, path: list[str]) -> list[str] | None:
        state[entry_id] = 1
        for target in entries[entry_id].links:
            if target not in entries:
                continue
            if state.get(target) == 1:
                return [*path, entry_id, target]
            if target not in state and (cycle := visit(target, [*path, entry_id])):
                return cycle
        state[entry_id] = 2
        return None

    for entry_id in sorted(entries):
        if entry_id not in state and (cycle := visit(entry_id, [])):
            return cycle
    return None


def validate_manifest(manifest: Manifest) -> Manifest:
    """Return `manifest` when it is consistent; raise `InvalidInput` listing every problem."""
    problems: list[dict[str, Any]] = []
    by_id: dict[str, ManifestEntry] = {}
    for index, entry in enumerate(manifest.entries):
        if entry.id in by_id:
            problems.append(
                {"loc": ["body", "entries", index, "id"], "msg": f"duplicate id {entry.id!r}"}
            )
        by_id[entry.id] = entry
    for index, entry in enumerate(manifest.entries):
        for target in entry.links:
            if target not in by_id:
                problems.append(
                    {"loc": ["body", "entries", index, "links"], "msg": f"unknown entry {target!r}"}
                )
    cycle = _find_cycle(by_id)
    if cycle:
        problems.append(
            {"loc": ["body", "entries"], "msg": f"links form a cycle: {' -> '.join(cycle)}"}
        )
    for role, view in manifest.roles.items():
        for field_name, ids in (("include", view.include or ()), ("exclude", view.exclude)):
            for entry_id in ids:
                if entry_id not in by_id:
                    problems.append(
                        {
                            "loc": ["body", "roles", role, field_name],
                            "msg": f"unknown entry {entry_id!r}",
                        }
                    )
    for entry_id in manifest.priorities:
        if entry_id not in by_id:
            problems.append({"loc": ["body", "priorities"], "msg": f"unknown entry {entry_id!r}"})
    if problems:
        raise RuleBroken("manifest_inconsistent", "the manifest is inconsistent", details=problems)
    return manifest


def view_for(
    manifest: Manifest, role: str, *, environment: str | None = None
) -> tuple[ManifestEntry, ...]:
    """The entries `role` loads, in priority order. A role without a view is a conflict with
    the stored manifest (`RoleNotInManifest`): the request itself is well formed."""
    view = manifest.roles.get(role)
    if view is None:
        raise RoleNotInManifest(
            f"the manifest has no view for role {role!r}",
            details=[{"loc": ["body", "role"], "msg": f"known roles: {sorted(manifest.roles)}"}],
        )
    by_id = {entry.id: entry for entry in manifest.entries}
    chosen: set[str] = set()
    pending = [
        i for i in (view.include if view.include is not None else by_id) if i not in view.exclude
    ]
    while pending:
        entry_id = pending.pop()
        if entry_id in chosen or entry_id in view.exclude:
            continue
        chosen.add(entry_id)
        pending.extend(by_id[entry_id].links)
    rank = {entry_id: position for position, entry_id in enumerate(manifest.priorities)}
    return tuple(
        sorted(
            (
                by_id[i]
                for i in chosen
                if not by_id[i].environments or environment in by_id[i].environments
            ),
            key=lambda entry: (rank.get(entry.id, len(rank)), entry.id),
        )
    )


def manifest_contributions(entries: Sequence[ManifestEntry]) -> tuple[Contribution, ...]:
    """Candidates for `/assemble`: rules as required prefix items, sources as task items offered
    by their index line when they have one (the body stays behind its locator until asked
    for). Explicit priority order maps onto `priority`, the first entry scoring 1.0."""
    count = len(entries)
    # The prefix is ordered by (source, id) for byte stability, so the id carries the rank.
    rules = tuple(
        Candidate(
            id=f"manifest:{position:04d}:{entry.id}",
            source="manifest",
            layer="prefix",
            source_class="manifest",
            content=entry.content,
            locator=entry.locator,
            required=True,
        )
        for position, entry in enumerate(entries)
        if entry.kind == "rule"
    )
    sources = tuple(
        Candidate(
            id=f"manifest:{entry.id}",
            source="manifest_sources",
            layer="task",
            source_class="manifest",
            content=entry.index if entry.index is not None else entry.content,
            locator=entry.locator,
            priority=1.0 - position / count,
            relevance=1.0,
        )
        for position, entry in enumerate(entries)
        if entry.kind == "source"
    )
    return tuple(
        Contribution(source=name, candidates=candidates)
        for name, candidates in (("manifest", rules), ("manifest_sources", sources))
        if candidates
    )
