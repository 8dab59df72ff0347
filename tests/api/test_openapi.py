"""The committed openapi.yaml is exactly what the app generates (`make openapi` refreshes it)."""

from __future__ import annotations

from pathlib import Path

from app.openapi import render_openapi

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.yaml"


def test_committed_openapi_matches_the_app() -> None:
    assert COMMITTED.read_text() == render_openapi(), "openapi.yaml drifted: run `make openapi`"
