"""Child sessions for sub-agents (delegate, fork) and the conclusions that flow back.

Every child is linked to its parent in the parent's log by a `contextd.child` fact. A child
declares which governance sections (world-state sections such as `rules`, `permissions`) it
inherits; undeclared means not inherited, and a child can never inherit a section its parent
does not have. Each child keeps its own `unit`, so its tokens are accounted separately. A
child's one conclusion is appended to its parent's log under the parent's lock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.contract.isolation import (
    ChildSessionResponse,
    ConclusionRequest,
    ConclusionResponse,
    DelegateRequest,
    ForkRequest,
)
from app.domain.errors import NotAChildSession, SectionNotInParent
from app.domain.facts import (
    ChildKind,
    child_link_fact,
    client_items,
    conclusion_fact,
    conclusion_item,
    delegate_brief,
)
from app.domain.ids import derive_id
from app.domain.items import Format
from app.domain.world_state import WorldState
from app.storage import fact_log, session_rows
from app.storage.tables import SessionRow
from app.tokens import token_counter
from app.usecases.loaded_history import load_history

__all__ = ["conclude", "create_child", "merge"]


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


def create_child(
    db: Session, *, tenant_id: int, parent_id: str, body: ForkRequest, now: datetime
) -> ChildSessionResponse:
    """A fork, or a delegate when `body` carries a brief, its facts recorded `now`."""
    kind: ChildKind = "delegate" if isinstance(body, DelegateRequest) else "fork"
    parent = session_rows.get_session(db, tenant_id=tenant_id, external_id=parent_id, lock=True)
    parent_state = load_history(db, parent).active.world_state
    inherit = _checked_inheritance(parent_state, body.inherit)
    brief = (
        client_items(body.items, body.format, field="items")
        if isinstance(body, DelegateRequest)
        else []
    )
    child, _ = session_rows.create_session(
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
            fact_log.append_facts(db, session=child, facts=facts, unit=body.unit, recorded_at=now)
    link = child_link_fact(
        child_session_id=child.external_id or "",
        kind=kind,
        inherit=inherit,
        unit=body.unit,
        fork_seq=child.fork_seq,
    )
    fact_log.append_facts(db, session=parent, facts=[link], recorded_at=now)
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


def conclude(
    db: Session,
    *,
    tenant_id: int,
    child_id: str,
    conclusion: dict[str, Any],
    fmt: Format,
    via: str,
    now: datetime,
) -> tuple[SessionRow, int]:
    """A child session's one conclusion appended to its parent's log (locked here), recorded
    `now`; the parent and the conclusion's seq there. From a session without a parent, a 409
    `not_a_child_session`. The caller commits."""
    child = session_rows.get_session(db, tenant_id=tenant_id, external_id=child_id)
    if child.parent_id is None:
        raise NotAChildSession(
            f"session {child_id!r} has no parent to report to",
            details=[{"loc": ["path", "session_id"], "msg": "not a child session"}],
        )
    item = conclusion_item(conclusion, fmt)
    parent = session_rows.get_session_by_pk(db, child.parent_id, lock=True)
    fact = conclusion_fact(
        item, from_session=child_id, via=via, count_tokens=token_counter(parent.encoding)
    )
    appended = fact_log.append_facts(
        db, session=parent, facts=[fact], unit=child.unit, recorded_at=now
    )
    return parent, appended.facts[-1].seq


def merge(
    db: Session, *, tenant_id: int, child_id: str, body: ConclusionRequest, now: datetime
) -> ConclusionResponse:
    """`POST /sessions/{id}/merge`: the child's one conclusion, in its parent's log."""
    parent, seq = conclude(
        db,
        tenant_id=tenant_id,
        child_id=child_id,
        conclusion=body.conclusion,
        fmt=body.format,
        via="merge",
        now=now,
    )
    db.commit()
    return ConclusionResponse(parent_id=parent.external_id or "", seq=seq)
