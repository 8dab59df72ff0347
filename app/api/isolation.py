"""Child sessions for sub-agents (delegate, fork), conclusions flowing back, and manifests.

Every child is linked to its parent in the parent's log by a `contextd.child` fact. A child
declares which governance sections (world-state sections such as `rules`, `permissions`) it
inherits; undeclared means not inherited, and a child can never inherit a section its parent
does not have. Each child keeps its own `unit`, so its tokens are accounted separately.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from sqlalchemy.orm import Session

from app.api.deps import Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.history import ActiveHistory, load_session_and_history
from app.api.json_body import JsonRoute
from app.api.models import (
    ChildSessionRequest,
    ChildSessionResponse,
    ConclusionRequest,
    ConclusionResponse,
    ManifestRequest,
    ManifestResponse,
    ManifestVersionResponse,
)
from app.api.sessions import client_items
from app.domain.errors import InvalidInput
from app.domain.ids import derive_id
from app.domain.items import (
    CHILD_FACT,
    GOAL_FACT,
    WORLD_STATE_FACT,
    Format,
    item_type,
    visible_text,
)
from app.domain.manifest import Manifest, ManifestEntry, RoleView, validate_manifest
from app.domain.world_state import render_section
from app.storage import repository
from app.storage.tables import SessionRow
from app.tokens import token_counter

router = APIRouter(
    route_class=JsonRoute, tags=["isolation and manifests"], responses=ERROR_RESPONSES
)


def _checked_inheritance(parent: ActiveHistory, inherit: dict[str, bool]) -> dict[str, bool]:
    lacking = sorted(
        s for s, wanted in inherit.items() if wanted and s not in parent.world_state.sections
    )
    if lacking:
        raise InvalidInput(
            "a child cannot inherit what its parent lacks: " + ", ".join(lacking),
            details=[
                {"loc": ["body", "inherit", s], "msg": "parent has no such section"}
                for s in lacking
            ],
        )
    return {section: wanted for section, wanted in inherit.items() if wanted}


def _append(
    db: Session, session: SessionRow, facts: list[repository.NewFact], *, unit: str | None
) -> int:
    result = repository.append_facts(
        db,
        session=session,
        facts=facts,
        unit=unit,
        phase=None,
        idempotency_key=None,
        expected_last_seq=None,
    )
    return result.facts[-1].seq


def _create_child(
    db: Session, *, tenant_id: int, parent_id: str, body: ChildSessionRequest, kind: str
) -> ChildSessionResponse:
    parent, parent_history = load_session_and_history(
        db, tenant_id=tenant_id, session_id=parent_id, lock=True
    )
    inherit = _checked_inheritance(parent_history, body.inherit)
    brief = client_items(body.items, body.format, field="items") if kind == "delegate" else []
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
    count_tokens = token_counter(child.encoding)
    origin = {"harness_authored": True, "source": kind}
    if kind == "delegate":
        sections = {s: v for s, v in parent_history.world_state.sections.items() if s in inherit}
        facts = []
        if body.goal is not None:
            goal = {"type": GOAL_FACT, "version": 1, "text": body.goal}
            facts.append(repository.NewFact(GOAL_FACT, goal, count_tokens(body.goal), origin))
        if sections:
            snapshot = {"type": WORLD_STATE_FACT, "version": 1, "snapshot": sections}
            facts.append(repository.NewFact(WORLD_STATE_FACT, snapshot, 0, origin))
            facts.extend(
                repository.NewFact(
                    "message", fragment, count_tokens(visible_text(fragment)), origin
                )
                for fragment in (
                    render_section(s, v, version=1) for s, v in sorted(sections.items())
                )
            )
        facts.extend(
            repository.NewFact(
                item_type(item), item, count_tokens(visible_text(item)), {"source": "brief"}
            )
            for item in brief
        )
        if facts:
            _append(db, child, facts, unit=body.unit)
    link = {
        "type": CHILD_FACT,
        "child_session_id": child.external_id,
        "kind": kind,
        "inherit": inherit,
        "unit": body.unit,
        "fork_seq": child.fork_seq,
    }
    _append(
        db, parent, [repository.NewFact(CHILD_FACT, link, 0, {"harness_authored": True})], unit=None
    )
    db.commit()
    return ChildSessionResponse(
        session_id=child.external_id or "",
        parent_id=parent_id,
        kind="delegate" if kind == "delegate" else "fork",
        inherit=inherit,
        unit=child.unit,
        fork_seq=child.fork_seq,
        last_seq=child.last_seq,
    )


@router.post(
    "/sessions/{session_id}/delegate",
    status_code=status.HTTP_201_CREATED,
    response_model=ChildSessionResponse,
)
def delegate(
    session_id: str, body: ChildSessionRequest, tenant_id: TenantId, db: Db
) -> ChildSessionResponse:
    """A child that starts from a brief (goal and the items given), not the parent's history."""
    if body.goal is None:
        raise InvalidInput(
            "a delegate needs a goal", details=[{"loc": ["body", "goal"], "msg": "required"}]
        )
    return _create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, kind="delegate")


@router.post(
    "/sessions/{session_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=ChildSessionResponse,
)
def fork(
    session_id: str, body: ChildSessionRequest, tenant_id: TenantId, db: Db
) -> ChildSessionResponse:
    """A child that sees the parent's active history as of now, shared rather than copied."""
    if body.goal is not None or body.items:
        raise InvalidInput(
            "a fork starts from its parent's history; `goal` and `items` are for delegates",
            details=[{"loc": ["body"], "msg": "goal and items are not accepted by fork"}],
        )
    return _create_child(db, tenant_id=tenant_id, parent_id=session_id, body=body, kind="fork")


def append_conclusion(
    db: Session, *, tenant_id: int, child_id: str, conclusion: dict[str, Any], fmt: Format, via: str
) -> ConclusionResponse:
    """Append one conclusion item of a child to its parent, with a back-reference to the child."""
    child = repository.get_session(db, tenant_id=tenant_id, external_id=child_id)
    if child.parent_id is None:
        raise InvalidInput(
            f"session {child_id!r} has no parent to report to",
            details=[{"loc": ["path", "session_id"], "msg": "not a child session"}],
        )
    items = client_items([conclusion], fmt, field="conclusion")
    if len(items) != 1:
        raise InvalidInput(
            "a conclusion is exactly one item",
            details=[{"loc": ["body", "conclusion"], "msg": "converts to several items"}],
        )
    [item] = items
    parent = db.get_one(SessionRow, child.parent_id, with_for_update=True)
    back_reference = {"from_session": child_id, "via": via, "harness_authored": True}
    count_tokens = token_counter(parent.encoding)
    seq = _append(
        db,
        parent,
        [
            repository.NewFact(
                item_type(item), item, count_tokens(visible_text(item)), back_reference
            )
        ],
        unit=child.unit,
    )
    db.commit()
    return ConclusionResponse(parent_id=parent.external_id or "", seq=seq)


@router.post(
    "/sessions/{session_id}/merge",
    status_code=status.HTTP_201_CREATED,
    response_model=ConclusionResponse,
)
def merge(
    session_id: str, body: ConclusionRequest, tenant_id: TenantId, db: Db
) -> ConclusionResponse:
    """The only way anything flows from a fork back to its parent: one explicit conclusion."""
    return append_conclusion(
        db,
        tenant_id=tenant_id,
        child_id=session_id,
        conclusion=body.conclusion,
        fmt=body.format,
        via="merge",
    )


def manifest_from(document: dict[str, Any]) -> Manifest:
    """The core's view of a stored (or posted) manifest document, validated."""
    body = ManifestRequest.model_validate(document)
    return validate_manifest(
        Manifest(
            entries=tuple(
                ManifestEntry(
                    id=e.id,
                    kind=e.kind,
                    content=e.content,
                    index=e.index,
                    locator=e.locator,
                    links=tuple(e.links),
                    environments=tuple(e.environments),
                )
                for e in body.entries
            ),
            roles={
                role: RoleView(
                    include=None if view.include is None else tuple(view.include),
                    exclude=tuple(view.exclude),
                )
                for role, view in body.roles.items()
            },
            priorities=tuple(body.priorities),
        )
    )


@router.put("/manifests/{name}", response_model=ManifestVersionResponse)
def put_manifest(
    name: str, body: ManifestRequest, tenant_id: TenantId, db: Db
) -> ManifestVersionResponse:
    document = body.model_dump(mode="json")
    manifest_from(document)
    version = repository.put_manifest(db, tenant_id=tenant_id, name=name, document=document)
    db.commit()
    return ManifestVersionResponse(name=name, version=version)


@router.get("/manifests/{name}", response_model=ManifestResponse)
def get_manifest(name: str, tenant_id: TenantId, db: Db) -> ManifestResponse:
    row = repository.get_manifest(db, tenant_id=tenant_id, name=name)
    return ManifestResponse(name=name, version=row.version, **row.document)
