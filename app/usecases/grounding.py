"""Next-action grounding, measured live: an assembly graded against the output its model took.

When an append carries a model's output (`next_action`) and finds, in the same statement, that
the latest assembly of its lineage (tenant, session, unit) is a session-mode one still
ungraded (`app.storage.groundings`), the work after the answer (`grade_next_action`) reads that
assembly and, when that output is the first model output logged since it, grades it
(`app.domain.grounding_index.grade_indexed`, which gives what
`app.domain.grounding.grade_action` gives over the history's text, reading the session's
occurrence index instead): which identifiers of the output the history held, and whether the
assembly showed them, listed them as elided, or neither. It reads what it needs first and ends
its transaction, so no connection is held while it grades. The outcome is stored on
the plan once (`GET /assemblies/{id}` shows it as `grounding`) and counted in Prometheus by unit
(`contextd_next_action_*`). A failure is logged and counted, never passed on: the caller has
its answer. Advice reads the outcomes back (`recent_groundings`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.domain.grounding import ActionGrounding, items_text
from app.domain.grounding_index import ElidedRange, grade_indexed, occurrence_index
from app.domain.items import Item, is_model_output
from app.domain.stored_plan import answer_of, offered
from app.metrics import AFTER_ANSWER_FAILURES, record_checkpoint, record_grounding
from app.storage import checkpoints, fact_log, groundings, session_rows
from app.storage.folds import fold_session
from app.usecases.plan_record import request_of, shown_history

log = logging.getLogger("contextd")

MAX_GAP_FACTS = 1_000
"""An output more facts than this after its assembly is not graded against it: reading the gap
would cost more than the figure is worth, and such an output answered something else."""


@dataclass(frozen=True)
class NextAction:
    """The model output items of an append, and the seq of the first."""

    items: tuple[Item, ...]
    first_seq: int


def next_action(items: Sequence[Item], *, first_seq: int) -> NextAction | None:
    """The first run of model output in a batch appended from `first_seq` on; None without."""
    start = next((n for n, item in enumerate(items) if is_model_output(item)), None)
    if start is None:
        return None
    end = next((n for n in range(start, len(items)) if not is_model_output(items[n])), len(items))
    return NextAction(items=tuple(items[start:end]), first_seq=first_seq + start)


def _shown_text(response: dict[str, Any]) -> str:
    """The text of what an assembly sent: its messages, and the system blocks of a format that
    carries them apart."""
    return items_text([response.get("system"), response.get("messages")])


def grade_next_action(
    db: Session,
    *,
    session_pk: int,
    tenant_id: int,
    unit: str | None,
    action: NextAction,
    batch_last_seq: int,
) -> None:
    """Grade the lineage's latest assembly against `action`, appended in a batch ending at
    `batch_last_seq`, and store and count the outcome; nothing when the latest assembly is graded
    already, or `action` is not its next action. Closes `db`.

    What it reads is read first and the transaction ended, so that no connection is held while
    it grades; the grade reads the session's occurrence index
    (`app.domain.grounding_index`), not the history's text."""
    try:
        with db:
            grading = _read_for_grading(
                db,
                session_pk=session_pk,
                tenant_id=tenant_id,
                unit=unit,
                action=action,
                batch_last_seq=batch_last_seq,
            )
        if grading is None:
            return
        row_id, grade = grading
        grounding = grade()
        with db:
            if groundings.record_grounding(
                db, session_pk=session_pk, row_id=row_id, grounding=grounding.as_dict()
            ):
                db.commit()
                record_grounding(grounding, unit=unit, tenant=tenant_id)
    except SQLAlchemyError:
        AFTER_ANSWER_FAILURES.labels("grounding").inc()
        log.exception("the next action in session #%s could not be graded", session_pk)


def _read_for_grading(
    db: Session,
    *,
    session_pk: int,
    tenant_id: int,
    unit: str | None,
    action: NextAction,
    batch_last_seq: int,
) -> tuple[int, Callable[[], ActionGrounding]] | None:
    """The row id of the assembly `action` grades, and the grading, which reads the database
    no more; None when there is nothing to grade."""
    assembly = groundings.latest_ungraded(db, tenant_id=tenant_id, session_pk=session_pk, unit=unit)
    if assembly is None or not 0 < action.first_seq - assembly.as_of_seq <= MAX_GAP_FACTS:
        return None
    session = session_rows.get_session_by_pk(db, session_pk)
    between = fact_log.read_facts(
        db, session_id=session.id, after_seq=assembly.as_of_seq, up_to_seq=action.first_seq - 1
    )
    if any(is_model_output(fact.item) and (fact.unit or session.unit) == unit for fact in between):
        return None  # the unit's model acted since: this output answers a later call
    active = fold_session(db, session, up_to_seq=batch_last_seq)
    as_of = assembly.as_of_seq
    # The history before the call: the active history (since the last reset) as the assembly
    # saw it, and the facts its elided ranges stand for.
    elided = [
        ElidedRange(int(entry["first_seq"]), int(entry["last_seq"]), str(entry["form"]))
        for entry in assembly.response.get("elided", ())
    ]
    # The service's own facts inside the elided ranges, read the first time only: the index
    # keeps them (a session that compacts has a compaction fact in every range it compacted).
    # A worker new to the session starts from the index its checkpoint holds, if it holds one.
    if checkpoints.restore_index(db, session_pk=session.id, logged=active.logged):
        record_checkpoint("restored_index")
    index = occurrence_index(active.logged, lock=threading.Lock)
    own = [seq for entry in elided for seq in active.logged.internal(entry.first, entry.last)]
    index.add_own_facts(
        fact_log.fact_items(db, session_id=session.id, seqs=index.own_facts_missing(own))
    )
    shown = _shown_text(
        answer_of(
            assembly.response,
            history=shown_history(db, session=session, as_of_seq=as_of),
            candidates=lambda: offered(
                request_of(db, assembly.request, tenant_id=tenant_id, session_key=session.id)
            ),
        )
    )

    def in_active(seq: int) -> bool:
        return seq <= as_of and active.position_of(seq) is not None

    def grade() -> ActionGrounding:
        return grade_indexed(
            action.items,
            index=index,
            in_active=in_active,
            written=[active.items[position] for position in active.written],
            elided=elided,
            shown=shown,
            goal=active.goal.text if active.goal is not None else "",
        )

    return assembly.row_id, grade
