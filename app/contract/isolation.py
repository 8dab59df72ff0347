"""The isolation router's models: manifests, a forked or delegated child session and the
conclusion it hands back. Field names are the contract."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from app.contract.common import Label, RequestModel, SessionIdText, StrictModel
from app.domain.facts import ChildKind
from app.domain.items import Format
from app.domain.manifest import EntryKind


class ManifestEntrySpec(StrictModel):
    id: Annotated[str, Field(min_length=1, max_length=200)]
    kind: EntryKind = "rule"
    content: Annotated[str, Field(max_length=1_000_000)]
    index: Annotated[str, Field(max_length=10_000)] | None = None
    locator: Annotated[str, Field(max_length=2000)] | None = None
    links: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)
    environments: list[Label] = Field(default_factory=list)


class RoleViewSpec(StrictModel):
    include: list[Annotated[str, Field(max_length=200)]] | None = None
    exclude: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)


def _every_key_named(schema: dict[str, Any]) -> None:
    """Pydantic states the pattern of a dict's keys as `patternProperties`, which leaves a key
    that does not match it unconstrained (and so valid to the schema); state it of every key."""
    ((pattern, values),) = schema.pop("patternProperties").items()
    schema["propertyNames"] = {**schema.get("propertyNames", {}), "pattern": pattern}
    schema["additionalProperties"] = values


class ManifestRequest(RequestModel):
    entries: Annotated[list[ManifestEntrySpec], Field(max_length=10_000)]
    roles: dict[Label, RoleViewSpec] = Field(
        default_factory=dict, json_schema_extra=_every_key_named
    )
    priorities: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list)


class ManifestResponse(ManifestRequest):
    name: str
    version: int


class ManifestVersionResponse(BaseModel):
    name: str
    version: int


class ForkRequest(RequestModel):
    """A fork sees its parent's active history as of now: it is given no brief."""

    session_id: SessionIdText | None = None
    inherit: dict[Annotated[str, Field(max_length=64)], bool] = Field(default_factory=dict)
    unit: Label | None = None


class DelegateRequest(ForkRequest):
    """A delegate starts from a brief, not its parent's history: a goal, and the items given."""

    goal: Annotated[str, Field(min_length=1, max_length=100_000)]
    items: list[dict[str, Any]] = Field(default_factory=list)
    format: Format = "responses"


class ChildSessionResponse(BaseModel):
    session_id: str
    parent_id: str
    kind: ChildKind
    inherit: dict[str, bool]
    unit: str | None
    fork_seq: int | None
    last_seq: int


class ConclusionRequest(RequestModel):
    conclusion: dict[str, Any]
    format: Format = "responses"


class ConclusionResponse(BaseModel):
    parent_id: str
    seq: int
