"""The models of a session's pinned state: its goal and its world state. Field names are the
contract."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from app.contract.common import RequestModel
from app.domain.world_state import SECTION_ID_PATTERN


class GoalRequest(RequestModel):
    text: Annotated[str, Field(min_length=1, max_length=100_000)]


class GoalResponse(BaseModel):
    version: int
    seq: int


class WorldStateRequest(RequestModel):
    sections: dict[str, Any] = Field(
        description="The whole current world state, by section id; a section left out is "
        "removed. A null member of an object means absent (as in a merge patch), except "
        "inside an array, which is kept whole.",
        json_schema_extra={
            "propertyNames": {"pattern": f"^{SECTION_ID_PATTERN}$"},
            # A section is removed by leaving it out; a null one would say it twice.
            "additionalProperties": {"not": {"type": "null"}},
        },
    )


class WorldStateResponse(BaseModel):
    version: int
    updates: list[dict[str, Any]]
    changes: list[dict[str, str]]
    patch: dict[str, Any] | None
