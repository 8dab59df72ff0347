"""Goals and world state: versioned facts in the session's log (see `app.domain.facts`)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Db, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.world import GoalRequest, GoalResponse, WorldStateRequest, WorldStateResponse
from app.usecases import world

router = APIRouter(
    route_class=JsonRoute,
    prefix="/sessions",
    tags=["goals and world state"],
    responses=ERROR_RESPONSES,
)


@router.put(
    "/{session_id}/goal",
    response_model=GoalResponse,
    responses=rule_responses("blank_goal", "unstorable_value"),
)
def put_goal(
    session_id: str, body: GoalRequest, tenant_id: TenantId, db: Db, now: Now
) -> GoalResponse:
    return world.put_goal(db, tenant_id=tenant_id, session_id=session_id, body=body, now=now)


@router.put(
    "/{session_id}/world-state",
    response_model=WorldStateResponse,
    responses=rule_responses("invalid_world_state", "unstorable_value"),
)
def put_world_state(
    session_id: str, body: WorldStateRequest, tenant_id: TenantId, db: Db, now: Now
) -> WorldStateResponse:
    return world.put_world_state(db, tenant_id=tenant_id, session_id=session_id, body=body, now=now)
