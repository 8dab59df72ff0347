"""The load manifest: validation, role views, priorities and the candidates they become."""

from __future__ import annotations

import pytest

from app.domain.assemble import Candidate, Contribution
from app.domain.errors import InvalidInput, RoleNotInManifest
from app.domain.manifest import (
    Manifest,
    ManifestEntry,
    RoleView,
    manifest_contributions,
    validate_manifest,
    view_for,
)

BASE = ManifestEntry(id="base", kind="rule", content="be kind")
SECURITY = ManifestEntry(id="security", kind="rule", content="no secrets", links=("base",))
PROD = ManifestEntry(id="prod", kind="rule", content="no deploys on Friday", environments=("prod",))
DOCS = ManifestEntry(
    id="docs", kind="source", content="body", index="docs: index", locator="file://d"
)
MANIFEST = Manifest(
    entries=(BASE, SECURITY, PROD, DOCS),
    roles={
        "coder": RoleView(include=("security", "prod", "docs")),
        "all": RoleView(exclude=("docs",)),
    },
    priorities=("security",),
)


def test_view_follows_links_orders_by_priority_and_filters_environment() -> None:
    assert view_for(MANIFEST, "coder") == (SECURITY, BASE, DOCS)
    assert view_for(MANIFEST, "coder", environment="prod") == (SECURITY, BASE, DOCS, PROD)
    assert view_for(MANIFEST, "all", environment="prod") == (SECURITY, BASE, PROD)


def test_a_role_without_a_view_is_refused() -> None:
    with pytest.raises(RoleNotInManifest, match="no view for role 'auditor'"):
        view_for(MANIFEST, "auditor")


def test_validation_lists_duplicates_unknown_links_cycles_and_unknown_references() -> None:
    broken = Manifest(
        entries=(
            ManifestEntry(id="a", kind="rule", content="x", links=("b",)),
            ManifestEntry(id="b", kind="rule", content="y", links=("a", "ghost")),
            ManifestEntry(id="c", kind="rule", content="z"),
            ManifestEntry(id="c", kind="rule", content="z again"),
        ),
        roles={"r": RoleView(include=("nope",))},
        priorities=("missing",),
    )
    with pytest.raises(InvalidInput) as caught:
        validate_manifest(broken)
    assert caught.value.details == [
        {"loc": ["body", "entries", 3, "id"], "msg": "duplicate id 'c'"},
        {"loc": ["body", "entries", 1, "links"], "msg": "unknown entry 'ghost'"},
        {"loc": ["body", "entries"], "msg": "links form a cycle: a -> b -> a"},
        {"loc": ["body", "roles", "r", "include"], "msg": "unknown entry 'nope'"},
        {"loc": ["body", "priorities"], "msg": "unknown entry 'missing'"},
    ]
    assert validate_manifest(MANIFEST) is MANIFEST


def test_rules_become_required_prefix_and_sources_their_index_line() -> None:
    assert manifest_contributions(view_for(MANIFEST, "coder")) == (
        Contribution(
            source="manifest",
            candidates=(
                Candidate(
                    id="manifest:0000:security",
                    source="manifest",
                    layer="prefix",
                    source_class="manifest",
                    content="no secrets",
                    required=True,
                ),
                Candidate(
                    id="manifest:0001:base",
                    source="manifest",
                    layer="prefix",
                    source_class="manifest",
                    content="be kind",
                    required=True,
                ),
            ),
        ),
        Contribution(
            source="manifest_sources",
            candidates=(
                Candidate(
                    id="manifest:docs",
                    source="manifest_sources",
                    layer="task",
                    source_class="manifest",
                    content="docs: index",
                    locator="file://d",
                    priority=1.0 - 2 / 3,
                    relevance=1.0,
                ),
            ),
        ),
    )
