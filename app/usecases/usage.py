"""Usage: what a provider reported for one call, folded into the cost metrics' cache-status
axis, and, against the assembly the call sent, into the session's tokenizer calibration.
"""

from __future__ import annotations

import math

from sqlalchemy.orm import Session

from app.contract.sessions import UsageRequest
from app.domain.calibration import calibrate
from app.domain.errors import AssemblyOfAnotherSession
from app.domain.prompt_cache import CacheOutcome, classify_outcome
from app.metrics import (
    record_cache_outcome,
    record_calibration,
    record_provider_usage,
)
from app.settings import Settings
from app.storage import cache_outcomes, plans, session_rows
from app.storage.plans import StoredAssembly
from app.storage.tables import SessionRow
from app.usecases.loaded_history import session_cache_terms, session_window

__all__ = ["report_usage"]


def report_usage(
    db: Session, *, tenant_id: int, session_id: str, body: UsageRequest, settings: Settings
) -> None:
    """Provider-reported usage, folded into the cache-status axis of the cost metrics. With an
    `assembly_id`, that assembly's predicted reused prefix is counted against the provider's
    cached tokens too, under the call's unit and phase, else the assembly's, and the outcome
    classified and stored on the assembly (`app.domain.prompt_cache`); and its
    `input_tokens` calibrate the session's model of provider tokens (an overhead and a ratio
    per encoding token), once per assembly (see the session's `tokenizer`). An assembly made
    for another session, or for none, is a 409 `assembly_of_another_session`."""
    # The calibration rules are `app.domain.calibration`'s.
    calibrates = body.assembly_id is not None and body.input_tokens > 0
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    unit, phase = body.unit, body.phase
    if body.assembly_id is not None:
        # Read before the session's row is locked: on PostgreSQL this may wait for the plan's
        # write, which takes a share lock on that row (its foreign key), so waiting for it
        # while holding the row would deadlock the two.
        assembly = plans.get_assembly(
            db, tenant_id=tenant_id, external_id=body.assembly_id, session_key=session.id
        )
        if calibrates:
            # Locked, and read again, when the report may calibrate: one session's reports
            # update its fit one after another.
            db.refresh(session, with_for_update=True)
        # The tenant can read this assembly, so a 404 would contradict GET /assemblies/{id}:
        # the id exists and the request is well formed; it conflicts with what is stored.
        if assembly.session_id != session.id:
            raise AssemblyOfAnotherSession(
                f"assembly {body.assembly_id!r} was not assembled for session {session_id!r}",
                details=[{"loc": ["body", "assembly_id"], "msg": "assembly of another session"}],
            )
        unit, phase = unit or assembly.unit, phase or assembly.phase
        predicted = assembly.response["cache"]["reused_prefix_tokens"]
        outcome = _outcome(db, assembly, session, settings, predicted, body.cached_tokens)
        cache_outcomes.record_outcome(db, assembly, outcome)
        record_cache_outcome(
            predicted_tokens=predicted,
            actual_tokens=body.cached_tokens,
            outcome=outcome,
            unit=unit,
            phase=phase,
            tenant=tenant_id,
        )
        # The fit is per token of the session's own encoding; an assembly counted in
        # another (a per-request `encoding`) says nothing about it. Plans stored before
        # assemblies named their encoding were counted in the session's.
        if calibrates and assembly.response.get("encoding", session.encoding) == session.encoding:
            window = session_window(settings, session)
            observation = calibrate(
                window.tokenizer,
                assembly_id=body.assembly_id,
                input_tokens=body.input_tokens,
                assembled_tokens=assembly.response["total_tokens"],
                usable=window.usable,
            )
            if observation is not None:
                calibrated = observation.tokenizer
                session_rows.save_calibration(db, session=session, calibration=calibrated.state())
                db.commit()
                record_calibration(
                    family=calibrated.family,
                    ratio=calibrated.ratio,
                    overhead=calibrated.overhead,
                    drift=observation.drift,
                )
        db.commit()  # the outcome, and the session's row lock when the report calibrated
    record_provider_usage(
        input_tokens=body.input_tokens,
        cached_tokens=body.cached_tokens,
        output_tokens=body.output_tokens,
        unit=unit,
        phase=phase,
        tenant=tenant_id,
    )


def _outcome(
    db: Session,
    assembly: StoredAssembly,
    session: SessionRow,
    settings: Settings,
    predicted: int,
    cached: int,
) -> CacheOutcome:
    """The class of the provider's `cached` tokens against the assembly's `predicted` reused
    prefix (in the session's encoding, converted to the provider's tokens by its tokenizer,
    with and without its overhead), by the session's cache terms and the time since the
    lineage's call before it."""
    window = session_window(settings, session)
    previous = cache_outcomes.previous_call_at(db, assembly)
    tokenizer = window.tokenizer
    least = math.floor(predicted * tokenizer.ratio)
    return classify_outcome(
        predicted=(least, tokenizer.provider_tokens(predicted) if predicted else 0),
        cached=cached,
        idle_seconds=None if previous is None else (assembly.created_at - previous).total_seconds(),
        terms=session_cache_terms(session, window),
    )
