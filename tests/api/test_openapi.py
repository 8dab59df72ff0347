"""The committed openapi.yaml is exactly what the app generates (`make openapi` refreshes it)."""

from __future__ import annotations

from pathlib import Path

from app.openapi import render_openapi

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.yaml"


def test_committed_openapi_matches_the_app() -> None:
    assert COMMITTED.read_text() == render_openapi(), "openapi.yaml drifted: run `make openapi`"


def test_the_schema_states_the_rules_the_service_enforces() -> None:
    import re

    import yaml

    from app.domain.world_state import SECTION_ID_PATTERN

    schema = yaml.safe_load(render_openapi())
    sections = schema["components"]["schemas"]["WorldStateRequest"]["properties"]["sections"]
    assert sections["propertyNames"] == {"pattern": f"^{SECTION_ID_PATTERN}$"}
    history = schema["paths"]["/sessions/{session_id}/history"]["get"]["parameters"]
    (modalities,) = [p for p in history if p["name"] == "input_modalities"]
    pattern = modalities["schema"]["pattern"]
    accepted = ["", "text", "text,image", "image,audio,text"]
    refused = ["smell", "text,", ",text", "text,smell"]
    assert [bool(re.fullmatch(pattern, value)) for value in accepted + refused] == [True] * 4 + [
        False
    ] * 4


def test_no_key_is_left_unconstrained() -> None:
    """`patternProperties` constrains only the keys that match it: a key that does not would be
    valid to the schema and refused by the service, so keys are stated with `propertyNames`."""
    assert "patternProperties" not in render_openapi()
