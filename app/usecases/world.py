"""Goals and world state: versioned facts in the session's log (see `app.domain.facts`),
written under the session's lock, each version counted from the one before it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.contract.world import GoalRequest, GoalResponse, WorldStateRequest, WorldStateResponse
from app.domain.errors import RuleBroken
from app.domain.facts import goal_fact, world_state_facts
from app.domain.world_state import diff_world_state, validate_sections
from app.storage import fact_log, session_rows
from app.tokens import token_counter
from app.usecases.loaded_history import load_history

__all__ = ["put_goal", "put_world_state"]


def put_goal(
    db: Session, *, tenant_id: int, session_id: str, body: GoalRequest, now: datetime
) -> GoalResponse:
    """`PUT /sessions/{id}/goal`: the goal's next version, recorded `now`; a blank one is a
    422 `blank_goal`."""
    if not body.text.strip():
        raise RuleBroken(
            "blank_goal",
            "the goal is empty",
            details=[{"loc": ["body", "text"], "msg": "blank goal"}],
        )
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
    goal = load_history(db, session).active.goal
    version = (goal.version if goal else 0) + 1
    fact = goal_fact(
        body.text, version=version, count_tokens=token_counter(session.encoding), source=None
    )
    result = fact_log.append_facts(db, session=session, facts=[fact], recorded_at=now)
    db.commit()
    return GoalResponse(version=version, seq=result.facts[0].seq)


def put_world_state(
    db: Session, *, tenant_id: int, session_id: str, body: WorldStateRequest, now: datetime
) -> WorldStateResponse:
    """`PUT /sessions/{id}/world-state`: the sections as the next version, recorded `now` as a
    merge patch against the one before it (the whole snapshot first)."""
    sections = validate_sections(body.sections)
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=True)
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
    fact_log.append_facts(db, session=session, facts=facts, recorded_at=now)
    db.commit()
    return WorldStateResponse(
        version=version,
        updates=list(update.updates),
        changes=[{"section": c.section, "change": c.change} for c in update.changes],
        patch=update.patch,
    )
