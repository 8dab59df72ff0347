"""Append: items into a session's fact log, exactly once per idempotency key.

Every item is checked and converted before anything is written (a refused batch writes
nothing); the batch gets consecutive seqs under the session's lock, or is refused whole when
`expected_last_seq` is not the session's last.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio.to_thread
from sqlalchemy.orm import Session

from app.contract.sessions import AppendedItem, AppendRequest, AppendResponse, ExcludedItem
from app.domain.errors import PayloadTooLarge, RuleBroken
from app.domain.facts import NewFact, client_batch, item_fact
from app.domain.items import admission_reason, is_model_output, item_type, malformation
from app.domain.json_encoding import encode_json
from app.metrics import record_append
from app.settings import Settings
from app.storage import appends
from app.storage.loop_pool import LoopPool
from app.tokens import token_counter
from app.usecases.grounding import grade_next_action, next_action

__all__ = ["LOOP_BODY_BYTES", "Appended", "append", "append_without_a_thread"]


@dataclass(frozen=True)
class Appended:
    """The answer; whether it replays a batch an idempotency key already wrote (nothing new);
    and the work left after the answer, if any."""

    answer: AppendResponse
    replayed: bool
    after_answer: Callable[[], None] | None


LOOP_BODY_BYTES = 16 * 1024
"""The largest request body appended on the event loop (`append_without_a_thread`), so that
counting its tokens holds the loop only briefly (the bound is measured in
`docs/performance.md`, "Appends on the event loop"). A larger one is counted and written in a
worker thread, where it holds no other request."""


@dataclass(frozen=True)
class Batch:
    """A request's items checked and converted, ready to count and write: nothing is written
    for a batch that fails a check."""

    items: list[dict[str, Any]]
    originals: list[dict[str, Any] | None]
    provenance: dict[str, Any]

    def facts_for(self, encoding: str) -> list[NewFact]:
        """The batch's facts, counted in `encoding`."""
        count_tokens = token_counter(encoding)
        return [
            item_fact(item, provenance=self.provenance, count_tokens=count_tokens, original=origin)
            for item, origin in zip(self.items, self.originals, strict=True)
        ]

    def to(
        self,
        session_id: str,
        tenant_id: int,
        body: AppendRequest,
        settings: Settings,
        *,
        now: datetime,
    ) -> appends.SessionBatch:
        """The batch as appended to the tenant's session `session_id` `now`, as `body` asks.
        Holding the model's output, it asks which assembly is still to grade against it."""
        return appends.SessionBatch(
            tenant_id=tenant_id,
            session_id=session_id,
            facts_for=self.facts_for,
            encoding_guess=settings.default_encoding,
            unit=body.unit,
            phase=body.phase,
            idempotency_key=body.idempotency_key,
            expected_last_seq=body.expected_last_seq,
            grade=any(is_model_output(item) for item in self.items),
            recorded_at=now,
        )


def batch_of(body: AppendRequest, settings: Settings) -> Batch:
    """The request's batch; raises `RuleBroken` for too many items, `PayloadTooLarge` for an
    item over the size limit, and the conversion's refusals (`client_batch`)."""
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
                f"items[{index}] (item {index + 1} of the batch) is {size:,} bytes of JSON; the "
                f"limit is {settings.max_item_bytes:,} bytes (CTX_MAX_ITEM_BYTES); store large "
                "content elsewhere and append a reference to it"
            )
    items, originals = client_batch(body.items, body.format, field="items")
    if body.malformed == "refuse":
        for index, item in enumerate(items):
            if (fault := malformation(item, item_type(item))) is not None:
                # Another format's message may become several items: the item is named as
                # converted, with its place in the request where it has one.
                where = f"item {index}" if body.format == "responses" else f"converted item {index}"
                raise RuleBroken(
                    "malformed_item",
                    f"{where} is malformed: {fault}; nothing was written",
                    details=[{"loc": ["body", "items", index], "msg": fault}],
                )
    return Batch(items, originals, body.metadata.model_dump(exclude_none=True))


def append(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    body: AppendRequest,
    settings: Settings,
    now: datetime,
) -> Appended:
    """`POST /sessions/{id}/items`: the items appended to the log as one batch, recorded `now`
    (or, for an
    idempotency key already used with the same batch, the batch as first written). When they
    hold the model's output after a session-mode assembly, `after_answer` grades that
    assembly against it (`grade_next_action`), in `db`, which it closes."""
    batch = batch_of(body, settings)
    return _append_batch(
        db,
        batch,
        tenant_id=tenant_id,
        session_id=session_id,
        body=body,
        settings=settings,
        now=now,
    )


def _append_batch(
    db: Session,
    batch: Batch,
    *,
    tenant_id: int,
    session_id: str,
    body: AppendRequest,
    settings: Settings,
    now: datetime,
) -> Appended:
    appended = appends.append_to_session(
        db, batch.to(session_id, tenant_id, body, settings, now=now)
    )
    if db.in_transaction():  # the locked way's, or a replay's read; the one statement commits
        db.commit()
    return _appended(batch, appended, body=body, tenant_id=tenant_id, grading_in=lambda: db)


async def append_without_a_thread(
    loop_pool: LoopPool | None,
    session_factory: Callable[[], Session],
    *,
    tenant_id: int,
    session_id: str,
    body: AppendRequest,
    body_bytes: int,
    settings: Settings,
    now: datetime,
) -> Appended:
    """`append`, on the event loop when it can be: a body of at most `LOOP_BODY_BYTES` on
    PostgreSQL is counted there and written by the one statement on a connection of
    `loop_pool` (`appends.append_on_the_loop`), with no worker thread. Anything else, a batch
    that statement leaves to the locked way or to a replay, and one that finds no connection of
    `loop_pool` free go to `append` in a worker thread, in a database session of its own. The
    answer is the same either way, and a batch checked on the loop is not checked again."""
    batch = None
    if loop_pool is not None and body_bytes <= LOOP_BODY_BYTES:
        batch = batch_of(body, settings)
        appended = await appends.append_on_the_loop(
            loop_pool, batch.to(session_id, tenant_id, body, settings, now=now)
        )
        if appended is not None:
            return _appended(
                batch, appended, body=body, tenant_id=tenant_id, grading_in=session_factory
            )
    return await anyio.to_thread.run_sync(
        functools.partial(
            _append_in_a_session_of_its_own,
            session_factory,
            batch,
            tenant_id=tenant_id,
            session_id=session_id,
            body=body,
            settings=settings,
            now=now,
        )
    )


def _append_in_a_session_of_its_own(
    session_factory: Callable[[], Session],
    batch: Batch | None,
    *,
    tenant_id: int,
    session_id: str,
    body: AppendRequest,
    settings: Settings,
    now: datetime,
) -> Appended:
    """`batch` (`body`'s, checked here when None) appended in a database session of its own."""
    db = session_factory()
    try:
        appended = _append_batch(
            db,
            batch if batch is not None else batch_of(body, settings),
            tenant_id=tenant_id,
            session_id=session_id,
            body=body,
            settings=settings,
            now=now,
        )
    except BaseException:
        db.close()
        raise
    if appended.after_answer is None:
        db.close()  # else the grading closes it
    return appended


def _appended(
    batch: Batch,
    appended: appends.SessionAppend,
    *,
    body: AppendRequest,
    tenant_id: int,
    grading_in: Callable[[], Session],
) -> Appended:
    """The answer to the append `appended` of `batch`, and the grading it calls for, run in the
    database session `grading_in()` (which it closes)."""
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
        ExcludedItem(
            seq=fact.seq,
            type=fact.type,
            reason=reason,
            detail=malformation(item, fact.type) if reason == "malformed" else None,
        )
        for fact, item in zip(result.facts, batch.items, strict=False)
        if (reason := admission_reason(item, harness_authored=harness_authored)) is not None
    ]
    answer = AppendResponse(
        first_seq=result.facts[0].seq,
        last_seq=result.facts[-1].seq,
        items=[AppendedItem(seq=f.seq, type=f.type, tokens=f.tokens) for f in result.facts],
        excluded=excluded,
        timeline=result.timeline,
    )
    # The append looked in the database (where any process stores its assemblies) for the
    # lineage's assembly still to grade: without one, grading would find nothing either.
    if result.replayed or appended.ungraded_as_of_seq is None:
        return Appended(answer, replayed=result.replayed, after_answer=None)
    action = next_action(batch.items, first_seq=answer.first_seq)
    if action is None:
        return Appended(answer, replayed=False, after_answer=None)

    def grade() -> None:
        grade_next_action(
            grading_in(),
            session_pk=appended.session_pk,
            tenant_id=tenant_id,
            unit=body.unit or appended.session_unit,
            action=action,
            batch_last_seq=answer.last_seq,
        )

    return Appended(answer, replayed=False, after_answer=grade)
