"""Goals and world state: versioned facts in the session's log (see `app.domain.facts`)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Db, Now, TenantId
from app.api.errors import ERROR_RESPONSES, rule_responses
from app.api.json_body import JsonRoute
from app.contract.world import GoalRequest, GoalResponse, WorldStateRequest, WorldStateResponse
from app.domain.errors import RuleBroken
from app.domain.facts import goal_fact, world_state_facts
from app.domain.world_state import diff_world_state, validate_sections
from app.storage import repository
from app.tokens import token_counter
from app.usecases.history import load_history

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
    if not body.text.strip():
        raise RuleBroken(
            "blank_goal",
            "the goal is empty",
            details=[{"loc": ["body", "text"], "msg": "blank goal"}],
        )
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    goal = load_history(db, session).active.goal
    version = (goal.version if goal else 0) + 1
    fact = goal_fact(
        body.text, version=version, count_tokens=token_counter(session.encoding), source=None
    )
    result = repository.append_facts(db, session=session, facts=[fact], recorded_at=now)
    db.commit()
    return GoalResponse(version=version, seq=result.facts[0].seq)


@router.put(
    "/{session_id}/world-state",
    response_model=WorldStateResponse,
    responses=rule_responses("invalid_world_state", "unstorable_value"),
)
def put_world_state(
    session_id: str, body: WorldStateRequest, tenant_id: TenantId, db: Db, now: Now
) -> WorldStateResponse:
    sections = validate_sections(body.sections)
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    history = load_history(db, session).active
    previous = history.world_state
    version = previous.version + 1
    update = diff_world_state(
        previous.sections if previous.version else None,
        sections,
        baseline=previous.baseline,
        active_history=history.items,
        version=version,
    )
    facts = world_state_facts(
        update, sections=sections, version=version, count_tokens=token_counter(session.encoding)
    )
    repository.append_facts(db, session=session, facts=facts, recorded_at=now)
    db.commit()
    return WorldStateResponse(
        version=version,
        updates=list(update.updates),
        changes=[{"section": c.section, "change": c.change} for c in update.changes],
        patch=update.patch,
    )
