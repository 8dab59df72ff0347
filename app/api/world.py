"""Goals and world state: versioned facts in the session's log.

A goal version is a `contextd.goal` fact. A world-state snapshot is a `contextd.world_state`
fact holding the full snapshot the first time and an RFC 7386 merge patch after; the update
fragments it produces are appended as harness-authored developer messages, so the
retained-fragment check can see whether the model still has them.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.history import load_session_and_history
from app.api.json_body import JsonRoute
from app.api.models import GoalRequest, GoalResponse, WorldStateRequest, WorldStateResponse
from app.domain.errors import InvalidInput
from app.domain.items import GOAL_FACT, WORLD_STATE_FACT, item_type, visible_text
from app.domain.world_state import diff_world_state, validate_sections
from app.storage import repository
from app.tokens import token_counter

router = APIRouter(
    route_class=JsonRoute,
    prefix="/sessions",
    tags=["goals and world state"],
    responses=ERROR_RESPONSES,
)


@router.put("/{session_id}/goal", response_model=GoalResponse)
def put_goal(session_id: str, body: GoalRequest, tenant_id: TenantId, db: Db) -> GoalResponse:
    if not body.text.strip():
        raise InvalidInput(
            "the goal is empty", details=[{"loc": ["body", "text"], "msg": "blank goal"}]
        )
    session, history = load_session_and_history(
        db, tenant_id=tenant_id, session_id=session_id, lock=True
    )
    version = (history.goal.version if history.goal else 0) + 1
    fact = {"type": GOAL_FACT, "version": version, "text": body.text}
    result = repository.append_facts(
        db,
        session=session,
        facts=[
            repository.NewFact(
                type=GOAL_FACT,
                item=fact,
                tokens=token_counter(session.encoding)(body.text),
                provenance={"harness_authored": True},
            )
        ],
        unit=None,
        phase=None,
        idempotency_key=None,
        expected_last_seq=None,
    )
    db.commit()
    return GoalResponse(version=version, seq=result.facts[0].seq)


@router.put("/{session_id}/world-state", response_model=WorldStateResponse)
def put_world_state(
    session_id: str, body: WorldStateRequest, tenant_id: TenantId, db: Db
) -> WorldStateResponse:
    sections = validate_sections(body.sections)
    session, history = load_session_and_history(
        db, tenant_id=tenant_id, session_id=session_id, lock=True
    )
    previous = history.world_state
    version = previous.version + 1
    update = diff_world_state(
        previous.sections if previous.version else None,
        sections,
        baseline=previous.baseline,
        active_history=history.items,
        version=version,
    )
    count_tokens = token_counter(session.encoding)
    record = (
        {"type": WORLD_STATE_FACT, "version": version, "patch": update.patch}
        if update.patch is not None
        else {"type": WORLD_STATE_FACT, "version": version, "snapshot": sections}
    )
    harness = {"harness_authored": True, "source": "world_state"}
    repository.append_facts(
        db,
        session=session,
        facts=[
            repository.NewFact(type=WORLD_STATE_FACT, item=record, tokens=0, provenance=harness),
            *(
                repository.NewFact(
                    type=item_type(item),
                    item=item,
                    tokens=count_tokens(visible_text(item)),
                    provenance=harness,
                )
                for item in update.updates
            ),
        ],
        unit=None,
        phase=None,
        idempotency_key=None,
        expected_last_seq=None,
    )
    db.commit()
    return WorldStateResponse(
        version=version,
        updates=list(update.updates),
        changes=[{"section": c.section, "change": c.change} for c in update.changes],
        patch=update.patch,
    )
