"""The client's models are what the committed openapi.yaml generates (`make client-models`), and
they accept fields the contract adds later."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from contextd_client import models

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
GENERATOR = Path(sys.executable).parent / "datamodel-codegen"


@pytest.mark.parametrize("profile", ["models", "params"])
def test_generated_modules_match_the_committed_contract(profile: str) -> None:
    check = subprocess.run(
        [GENERATOR, "--profile", profile, "--check"],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, (
        f"contextd_client/{profile}.py drifted from openapi.yaml: run `make client-models`\n"
        f"{check.stdout[-4000:]}"
    )


def test_every_model_keeps_fields_it_does_not_know() -> None:
    wire_models = [
        model
        for _, model in inspect.getmembers(models, inspect.isclass)
        if issubclass(model, BaseModel) and model.__module__ == models.__name__
    ]
    assert len(wire_models) > 50
    assert {m.__name__: m.model_config.get("extra") for m in wire_models} == {
        m.__name__: "allow" for m in wire_models
    }
    answer = models.AppendResponse.model_validate_json(
        b'{"first_seq": 1, "last_seq": 1, "excluded": [], "added_later": {"x": 1},'
        b' "items": [{"seq": 1, "type": "message", "tokens": 3, "weight": 0.5}]}'
    )
    assert answer == models.AppendResponse(
        first_seq=1,
        last_seq=1,
        excluded=[],
        items=[models.AppendedItem(seq=1, type="message", tokens=3, weight=0.5)],
        added_later={"x": 1},
    )
