"""Child sessions for sub-agents (delegate, fork) and the conclusions flowing back
(`app.usecases.isolation`)."""

from __future__ import annotations

from fastapi import APIRouter, status

from app.api.deps import Db, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.isolation import (
    ChildSessionResponse,
    ConclusionRequest,
    ConclusionResponse,
    DelegateRequest,
    ForkRequest,
)
from app.usecases import isolation

router = APIRouter(
    route_class=JsonRoute, tags=["isolation and manifests"], responses=ERROR_RESPONSES
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
    return isolation.create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, now=now)


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
    return isolation.create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, now=now)


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
    return isolation.merge(db, tenant_id=tenant_id, child_id=session_id, body=body, now=now)
