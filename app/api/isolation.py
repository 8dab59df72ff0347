"""Child sessions for sub-agents (delegate, fork), conclusions flowing back, and manifests.

Every child is linked to its parent in the parent's log by a `contextd.child` fact. A child
declares which governance sections (world-state sections such as `rules`, `permissions`) it
inherits; undeclared means not inherited, and a child can never inherit a section its parent
does not have. Each child keeps its own `unit`, so its tokens are accounted separately.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, status
from sqlalchemy.orm import Session

from app.api.deps import Db, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.common import ManifestName
from app.contract.isolation import (
    ChildSessionResponse,
    ConclusionRequest,
    ConclusionResponse,
    DelegateRequest,
    ForkRequest,
    ManifestRequest,
    ManifestResponse,
    ManifestVersionResponse,
)
from app.domain.errors import SectionNotInParent
from app.domain.facts import ChildKind, child_link_fact, client_items, delegate_brief
from app.domain.ids import derive_id
from app.domain.manifest import manifest_from_document
from app.domain.world_state import WorldState
from app.storage import repository
from app.tokens import token_counter
from app.usecases.history import load_history

router = APIRouter(
    route_class=JsonRoute, tags=["isolation and manifests"], responses=ERROR_RESPONSES
)


def _checked_inheritance(parent: WorldState, inherit: dict[str, bool]) -> dict[str, bool]:
    lacking = sorted(s for s, wanted in inherit.items() if wanted and s not in parent.sections)
    if lacking:
        raise SectionNotInParent(
            "a child cannot inherit what its parent lacks: " + ", ".join(lacking),
            details=[
                {"loc": ["body", "inherit", s], "msg": "parent has no such section"}
                for s in lacking
            ],
        )
    return {section: wanted for section, wanted in inherit.items() if wanted}


def _create_child(
    db: Session, *, tenant_id: int, parent_id: str, body: ForkRequest, now: datetime
) -> ChildSessionResponse:
    """A fork, or a delegate when `body` carries a brief, its facts recorded `now`."""
    kind: ChildKind = "delegate" if isinstance(body, DelegateRequest) else "fork"
    parent = repository.get_session(db, tenant_id=tenant_id, external_id=parent_id, lock=True)
    parent_state = load_history(db, parent).active.world_state
    inherit = _checked_inheritance(parent_state, body.inherit)
    brief = (
        client_items(body.items, body.format, field="items")
        if isinstance(body, DelegateRequest)
        else []
    )
    child, _ = repository.create_session(
        db,
        tenant_id=tenant_id,
        external_id=body.session_id,
        encoding=parent.encoding,
        context_window=parent.context_window,
        model=parent.model,
        attributes={"metadata": {}, "hooks": {}},
        derive_id=lambda internal_id: derive_id("sess", tenant_id, internal_id),
        parent=parent,
        kind=kind,
        inherit=inherit,
        unit=body.unit,
    )
    if isinstance(body, DelegateRequest):
        facts = delegate_brief(
            goal=body.goal,
            sections={s: v for s, v in parent_state.sections.items() if s in inherit},
            brief=brief,
            count_tokens=token_counter(child.encoding),
        )
        if facts:
            repository.append_facts(db, session=child, facts=facts, unit=body.unit, recorded_at=now)
    link = child_link_fact(
        child_session_id=child.external_id or "",
        kind=kind,
        inherit=inherit,
        unit=body.unit,
        fork_seq=child.fork_seq,
    )
    repository.append_facts(db, session=parent, facts=[link], recorded_at=now)
    db.commit()
    return ChildSessionResponse(
        session_id=child.external_id or "",
        parent_id=parent_id,
        kind=kind,
        inherit=inherit,
        unit=child.unit,
        fork_seq=child.fork_seq,
        last_seq=child.last_seq,
    )


@router.post(
    "/sessions/{session_id}/delegate",
    status_code=status.HTTP_201_CREATED,
    response_model=ChildSessionResponse,
    responses=rule_responses("reserved_item_type", "unstorable_value"),
)
def delegate(
    session_id: str, body: DelegateRequest, tenant_id: TenantId, db: Db, now: Now
) -> ChildSessionResponse:
    """A child that starts from a brief (goal and the items given), not the parent's history.
    Inheriting a world-state section the parent lacks is a 409 `section_not_in_parent`."""
    return _create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, now=now)


@router.post(
    "/sessions/{session_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=ChildSessionResponse,
    responses=rule_responses("unstorable_value"),
)
def fork(
    session_id: str, body: ForkRequest, tenant_id: TenantId, db: Db, now: Now
) -> ChildSessionResponse:
    """A child that sees the parent's active history as of now, shared rather than copied.
    Inheriting a world-state section the parent lacks is a 409 `section_not_in_parent`."""
    return _create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, now=now)


@router.post(
    "/sessions/{session_id}/merge",
    status_code=status.HTTP_201_CREATED,
    response_model=ConclusionResponse,
    responses=rule_responses("conclusion_not_one_item", "reserved_item_type", "unstorable_value"),
)
def merge(
    session_id: str, body: ConclusionRequest, tenant_id: TenantId, db: Db, now: Now
) -> ConclusionResponse:
    """The only way anything flows from a fork back to its parent: one explicit conclusion.
    From a session without a parent, a 409 `not_a_child_session`."""
    parent, seq = repository.append_conclusion(
        db,
        tenant_id=tenant_id,
        child_id=session_id,
        conclusion=body.conclusion,
        fmt=body.format,
        via="merge",
        recorded_at=now,
    )
    db.commit()
    return ConclusionResponse(parent_id=parent.external_id or "", seq=seq)


@router.put(
    "/manifests/{name}",
    response_model=ManifestVersionResponse,
    responses=rule_responses("manifest_inconsistent", "unstorable_value"),
)
def put_manifest(
    name: Annotated[ManifestName, Path()], body: ManifestRequest, tenant_id: TenantId, db: Db
) -> ManifestVersionResponse:
    document = body.model_dump(mode="json")
    manifest_from_document(document)
    version = repository.put_manifest(db, tenant_id=tenant_id, name=name, document=document)
    db.commit()
    return ManifestVersionResponse(name=name, version=version)


@router.get("/manifests/{name}", response_model=ManifestResponse)
def get_manifest(name: str, tenant_id: TenantId, db: Db) -> ManifestResponse:
    row = repository.get_manifest(db, tenant_id=tenant_id, name=name)
    return ManifestResponse(name=name, version=row.version, **row.document)
