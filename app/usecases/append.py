"""Append: items into a session's fact log, exactly once per idempotency key.

Every item is checked and converted before anything is written (a refused batch writes
nothing); the batch gets consecutive seqs under the session's lock, or is refused whole when
`expected_last_seq` is not the session's last.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.contract.sessions import AppendedItem, AppendRequest, AppendResponse, ExcludedItem
from app.domain.errors import PayloadTooLarge, RuleBroken
from app.domain.facts import NewFact, client_batch, item_fact
from app.domain.items import admission_reason, is_model_output
from app.domain.json_encoding import encode_json
from app.metrics import record_append
from app.settings import Settings
from app.storage import appends
from app.tokens import token_counter
from app.usecases.grounding import grade_next_action, next_action

__all__ = ["Appended", "append"]


@dataclass(frozen=True)
class Appended:
    """The answer; whether it replays a batch an idempotency key already wrote (nothing new);
    and the work left after the answer, if any."""

    answer: AppendResponse
    replayed: bool
    after_answer: Callable[[], None] | None


def append(
    db: Session, *, tenant_id: int, session_id: str, body: AppendRequest, settings: Settings
) -> Appended:
    """`POST /sessions/{id}/items`: the items appended to the log as one batch (or, for an
    idempotency key already used with the same batch, the batch as first written). When they
    hold the model's output after a session-mode assembly, `after_answer` grades that
    assembly against it (`grade_next_action`)."""
    if len(body.items) > settings.max_items_per_request:
        raise RuleBroken(
            "too_many_items",
            f"at most {settings.max_items_per_request} items per request",
            details=[{"loc": ["body", "items"], "msg": "too many items"}],
        )
    for index, item in enumerate(body.items):
        size = len(encode_json(item))
        if size > settings.max_item_bytes:
            raise PayloadTooLarge(
                f"item {index} is {size} bytes; the limit is {settings.max_item_bytes} bytes"
            )
    items, originals = client_batch(body.items, body.format, field="items")
    provenance = body.metadata.model_dump(exclude_none=True)

    def facts_for(encoding: str) -> list[NewFact]:
        count_tokens = token_counter(encoding)
        return [
            item_fact(item, provenance=provenance, count_tokens=count_tokens, original=original)
            for item, original in zip(items, originals, strict=True)
        ]

    appended = appends.append_to_session(
        db,
        tenant_id=tenant_id,
        session_id=session_id,
        facts_for=facts_for,
        encoding_guess=settings.default_encoding,
        unit=body.unit,
        phase=body.phase,
        idempotency_key=body.idempotency_key,
        expected_last_seq=body.expected_last_seq,
        grade=any(is_model_output(item) for item in items),
    )
    if db.in_transaction():  # the locked way's, or a replay's read; the one statement commits
        db.commit()
    result = appended.result
    if not result.replayed:
        record_append(
            (fact.type for fact in result.facts),
            tokens=sum(fact.tokens for fact in result.facts),
            unit=body.unit,
            phase=body.phase,
            tenant=tenant_id,
        )
    harness_authored = body.metadata.harness_authored
    excluded = [
        ExcludedItem(seq=fact.seq, type=fact.type, reason=reason)
        for fact, item in zip(result.facts, items, strict=False)
        if (reason := admission_reason(item, harness_authored=harness_authored)) is not None
    ]
    answer = AppendResponse(
        first_seq=result.facts[0].seq,
        last_seq=result.facts[-1].seq,
        items=[AppendedItem(seq=f.seq, type=f.type, tokens=f.tokens) for f in result.facts],
        excluded=excluded,
    )
    action = next_action(items, first_seq=answer.first_seq)
    # The append looked in the database (where any process stores its assemblies) for the
    # lineage's assembly still to grade: without one, grading would find nothing either.
    if result.replayed or action is None or appended.ungraded_as_of_seq is None:
        return Appended(answer, replayed=result.replayed, after_answer=None)
    grade = functools.partial(
        grade_next_action,
        db,
        session_pk=appended.session_pk,
        tenant_id=tenant_id,
        unit=body.unit or appended.session_unit,
        action=action,
        batch_last_seq=answer.last_seq,
    )
    return Appended(answer, replayed=False, after_answer=grade)
