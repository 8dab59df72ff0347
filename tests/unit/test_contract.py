"""The contract's typed shortcuts agree with its models."""

from __future__ import annotations

from typing import get_type_hints

from app.contract.assembly import AssembleAnswer, AssembleResponse


def test_the_assembly_answer_is_the_response_without_its_id() -> None:
    assert set(get_type_hints(AssembleAnswer)) == set(AssembleResponse.model_fields) - {
        "assembly_id"
    }
