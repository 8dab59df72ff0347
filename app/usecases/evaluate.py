"""`POST /sessions/{id}/evaluate`: a session's logged turns replayed as a runtime would make
them, under the session's own settings and under named variants of them, and what each would
have cost and shown (`app.domain.evaluation`).

The replay runs on a scratch store (`app.storage.scratch`), by a runtime of its own
(`app.usecases.replay_runtime`): a session of its own per variant,
its log the source log's facts copied in seq order (the source's own compactions left out: each
variant makes its own), and before every model call (the first fact of each run of model
output) the runtime's step: a session-mode `/assemble`, and when the advice says to compact
(and the variant follows it), `/compact` with the variant's strategy (else the recommended
one), then `/assemble` again if it applied. That context is what the call would have sent: a
simulated provider cache in the session's own terms serves it, and the runtime reports what it
served (`/usage`), as a runtime reports its provider's. Each identifier the grading finds only
in an elided entry is searched for with `/recall` over that entry's range, and once the log is
replayed, each assembly's own grade (made when its call's output was appended) is read back.
Nothing is written to the source session, its plans or the service's metrics, and no hook
or summarizer is called. A product record's summary is the built-in one, or, for a variant
whose `summarizer` is `client`, the narrative the log recorded where the session compacted
with a summarizer of its own (`client` or `llm`): the newest such compaction logged before the
replayed one, each used once; where there is none, the built-in one. A variant's `cache` terms
are what the service is told (its advice prices the cache by them); the provider simulated
stays the session's.

A fork's history starts from its parent's as of the fork point, so its replay recreates the
parent (and the parent's, for a fork of a fork) on the scratch store first, with its log up to
that point copied whole, and replays the fork's own turns from there.

Deterministic: the replay's clock is the log's own (each call is made at the time its last
fact was recorded), and every id the service derives is a function of the scratch store's
contents, so the same log and variants give the same answer.

Bounded before any work (`PayloadTooLarge`, 413): the facts a session may hold
(`CTX_EVALUATE_MAX_FACTS`) and the calls one evaluation replays over all its variants
(`CTX_EVALUATE_MAX_CALLS`); and each tenant runs at most `CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT`
at once per process (`TenantBusy`, 429).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app import metrics
from app.contract.evaluation import CURRENT, EvaluateRequest, EvaluateVariant
from app.contract.sessions import SessionHooks
from app.domain.advice import Watermarks
from app.domain.compaction import DEFAULT_KEEP_RECENT
from app.domain.errors import PayloadTooLarge, RuleBroken, TenantBusy
from app.domain.evaluation import VariantTally
from app.domain.grounding import items_text
from app.domain.ids import derive_id
from app.domain.items import INTERNAL_TYPE_PREFIX, is_model_output
from app.domain.prompt_cache import CACHE_TERMS
from app.settings import Settings
from app.storage import fact_log, session_rows
from app.storage.folds import fold_session
from app.storage.scratch import scratch_store
from app.storage.tables import SessionRow
from app.tenant_slots import TenantSlots
from app.usecases.loaded_history import session_watermarks, session_window
from app.usecases.replay_runtime import ReplayRuntime, Variant, copy_facts

__all__ = ["Prepared", "evaluating", "prepare", "run", "tenant_busy"]

evaluating = TenantSlots()
"""Each tenant's evaluations under way in this process, run now or as jobs."""


@dataclass(frozen=True)
class _Call:
    """One model call of the log: the facts before it, and the text of what it produced."""

    facts: tuple[Any, ...]
    """The facts logged since the previous call (the log's rows), to append before it."""
    output_text: str


@dataclass(frozen=True)
class _Ancestor:
    """A session a fork's history starts from, as the replay recreates it: its columns and its
    log up to the fork point."""

    external_id: str
    encoding: str
    context_window: int
    model: str | None
    attributes: dict[str, Any]
    inherit: dict[str, Any]
    unit: str | None
    facts: tuple[Any, ...]


@dataclass(frozen=True)
class Prepared:
    """An evaluation read and checked, not yet run: the log's calls and the variants."""

    session: SessionRow
    session_id: str
    calls: tuple[_Call, ...]
    rest: tuple[Any, ...]
    variants: tuple[Variant, ...]
    opened_at: datetime
    """When the log's first fact was recorded (the session's creation, for an empty log): the
    replay's clock before any fact is copied."""
    ancestry: tuple[_Ancestor, ...] = ()
    """For a fork: the sessions its history starts from, the outermost first."""

    @property
    def calls_total(self) -> int:
        """The calls the replay makes over all its variants."""
        return len(self.calls) * len(self.variants)


def prepare(
    db: Session, *, tenant_id: int, session_id: str, body: EvaluateRequest, settings: Settings
) -> Prepared:
    """The session's log and the request's variants, checked against the limits (module
    docstring) before any work; the transaction that read them ended."""
    session = session_rows.get_session(db, tenant_id=tenant_id, external_id=session_id)
    if session.last_seq > settings.evaluate_max_facts:
        raise PayloadTooLarge(
            f"session {session_id!r} holds {session.last_seq} facts; an evaluation replays at"
            f" most {settings.evaluate_max_facts} (CTX_EVALUATE_MAX_FACTS)"
        )
    facts = fact_log.read_facts(db, session_id=session.id, up_to_seq=session.last_seq)
    ancestry = _ancestry(db, session)
    total = len(facts) + sum(len(ancestor.facts) for ancestor in ancestry)
    if total > settings.evaluate_max_facts:
        raise PayloadTooLarge(
            f"session {session_id!r} and the history it was forked from hold {total} facts; an"
            f" evaluation replays at most {settings.evaluate_max_facts} (CTX_EVALUATE_MAX_FACTS)"
        )
    db.rollback()  # the replay holds no transaction of the service's store
    calls, rest = _calls(facts)
    variants = tuple(
        _resolved(variant, number, session, settings)
        for number, variant in enumerate(_with_current(body))
    )
    opened_at = facts[0].recorded_at if facts else session.created_at
    prepared = Prepared(session, session_id, tuple(calls), rest, variants, opened_at, ancestry)
    if prepared.calls_total > settings.evaluate_max_calls:
        raise PayloadTooLarge(
            f"{len(variants)} variants of {len(calls)} calls make {prepared.calls_total}"
            f" replayed calls; an evaluation replays at most {settings.evaluate_max_calls}"
            " (CTX_EVALUATE_MAX_CALLS): evaluate fewer variants at once"
        )
    return prepared


def _ancestry(db: Session, session: SessionRow) -> tuple[_Ancestor, ...]:
    """The sessions a fork's history starts from, each with its log up to its child's fork
    point, the outermost first (none for a root session or a delegate, whose log holds its
    whole start)."""
    chain: list[_Ancestor] = []
    child = session
    while child.kind == "fork" and child.parent_id is not None and child.fork_seq is not None:
        parent = session_rows.get_session_by_pk(db, child.parent_id)
        facts = fact_log.read_facts(db, session_id=parent.id, up_to_seq=child.fork_seq)
        chain.append(
            _Ancestor(
                external_id=parent.external_id or "",
                encoding=parent.encoding,
                context_window=parent.context_window,
                model=parent.model,
                attributes=parent.attributes,
                inherit=parent.inherit,
                unit=parent.unit,
                facts=tuple(facts),
            )
        )
        child = parent
    return tuple(reversed(chain))


def tenant_busy(settings: Settings) -> TenantBusy:
    return TenantBusy(
        "this tenant has as many evaluations under way as it may"
        f" ({settings.evaluate_max_concurrent_per_tenant},"
        " CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT); retry when one is done"
    )


def run(
    prepared: Prepared, settings: Settings, *, progress: Callable[[int], None] = lambda _: None
) -> dict[str, Any]:
    """The evaluation's answer. `progress(calls_done)` is told after each replayed call (of
    `prepared.calls_total`); what it raises stops the replay."""
    done = itertools.count(1)
    with metrics.muted():
        results = [
            _replay(
                variant,
                prepared,
                settings=settings,
                after_call=lambda: progress(next(done)),
            )
            for variant in prepared.variants
        ]
    return {
        "session_id": prepared.session_id,
        "last_seq": prepared.session.last_seq,
        "calls": len(prepared.calls),
        "variants": results,
    }


def _with_current(body: EvaluateRequest) -> Iterator[EvaluateVariant]:
    yield EvaluateVariant.model_construct(name=CURRENT, follow_advice=True)
    yield from body.variants


def _resolved(
    variant: EvaluateVariant, number: int, session: SessionRow, settings: Settings
) -> Variant:
    """`variant` (the `number`th, `current` the 0th) with every setting left out the
    session's; watermarks that end up inverted are refused (`watermarks_out_of_order`)."""
    own = session_watermarks(settings, session.attributes.get("compaction", {}))
    marks = variant.watermarks
    high = marks.high if marks and marks.high is not None else own.high
    low = marks.low if marks and marks.low is not None else own.low
    try:
        Watermarks(high=high, low=low)
    except ValueError as exc:
        raise RuleBroken(
            "watermarks_out_of_order",
            f"variant {variant.name!r}: low watermark {low} is not below high watermark {high}"
            " (a watermark left out is the session's)",
            details=[{"loc": ["body", "variants", number - 1, "watermarks"], "msg": str(exc)}],
        ) from exc
    return Variant(
        name=variant.name,
        context_window=variant.context_window or session.context_window,
        strategy=variant.strategy,
        high_watermark=high,
        low_watermark=low,
        keep_recent=DEFAULT_KEEP_RECENT if variant.keep_recent is None else variant.keep_recent,
        follow_advice=variant.follow_advice,
        recall_tool=session.attributes.get("recall_tool", True)
        if variant.recall_tool is None
        else variant.recall_tool,
        cache={
            **session.attributes.get("cache", {}),
            **(variant.cache.model_dump(exclude_none=True) if variant.cache else {}),
        },
        summarizer=variant.summarizer,
    )


def _calls(facts: Sequence[Any]) -> tuple[list[_Call], tuple[Any, ...]]:
    """The log's model calls, each the first fact of a run of model output (the facts of the
    service's own between them do not end a run), and the facts after the last call starts."""
    starts = []
    in_output = False
    for index, fact in enumerate(facts):
        if fact.type.startswith(INTERNAL_TYPE_PREFIX):
            continue
        output = is_model_output(fact.item)
        if output and not in_output:
            starts.append(index)
        in_output = output
    calls, previous = [], 0
    for start in starts:
        produced = []
        for fact in facts[start:]:
            if fact.type.startswith(INTERNAL_TYPE_PREFIX):
                continue
            if not is_model_output(fact.item):
                break
            produced.append(fact.item)
        calls.append(_Call(tuple(facts[previous:start]), items_text(produced)))
        previous = start
    return calls, tuple(facts[previous:])


def _replay(
    variant: Variant, prepared: Prepared, *, settings: Settings, after_call: Callable[[], None]
) -> dict[str, Any]:
    """One variant's replay, on a scratch store of its own where the session has the tenant
    and the name it has here (so the same ids), and its figures."""
    source, name = prepared.session, prepared.session_id
    with (
        scratch_store(settings, tenant_id=source.tenant_id) as (scratch, sessions),
        sessions() as db,
    ):
        parent = None
        for ancestor in prepared.ancestry:
            parent = _recreated(db, ancestor, parent=parent, tenant_id=source.tenant_id)
        session, _ = session_rows.create_session(
            db,
            tenant_id=source.tenant_id,
            external_id=name,
            encoding=source.encoding,
            context_window=variant.context_window,
            model=source.model,
            attributes={
                **source.attributes,
                "hooks": SessionHooks().model_dump(mode="json"),
                "compaction": {
                    "high_watermark": variant.high_watermark,
                    "low_watermark": variant.low_watermark,
                },
                "recall_tool": variant.recall_tool,
                "cache": variant.cache,
            },
            derive_id=lambda internal_id: derive_id("sess", source.tenant_id, internal_id),
            parent=parent,
            kind="fork" if parent is not None else "root",
            inherit=source.inherit if parent is not None else None,
            unit=source.unit,
        )
        db.commit()
        window = session_window(scratch, session)
        # The provider is the session's, whatever the variant tells the service of it.
        provider = CACHE_TERMS[window.tokenizer.family].with_overrides(
            source.attributes.get("cache", {})
        )
        runtime = ReplayRuntime(
            db,
            tenant_id=source.tenant_id,
            session_id=name,
            variant=variant,
            settings=scratch,
            tally=VariantTally(window=window.tokens, terms=provider),
            opened_at=prepared.opened_at,
        )
        if parent is not None:
            runtime.inherit(fold_session(db, session))
        for call in prepared.calls:
            runtime.append(call.facts)
            runtime.call(call.output_text)
            after_call()
        runtime.append(prepared.rest)
        runtime.read_grades()
        return {"name": variant.name, "settings": variant.settings(), **runtime.tally.figures()}


def _recreated(
    db: Session, ancestor: _Ancestor, *, parent: SessionRow | None, tenant_id: int
) -> SessionRow:
    """`ancestor` on the scratch store (a fork of `parent`, when given), its log copied whole
    as it was recorded."""
    row, _ = session_rows.create_session(
        db,
        tenant_id=tenant_id,
        external_id=ancestor.external_id,
        encoding=ancestor.encoding,
        context_window=ancestor.context_window,
        model=ancestor.model,
        attributes={**ancestor.attributes, "hooks": SessionHooks().model_dump(mode="json")},
        derive_id=lambda internal_id: derive_id("sess", tenant_id, internal_id),
        parent=parent,
        kind="fork" if parent is not None else "root",
        inherit=ancestor.inherit if parent is not None else None,
        unit=ancestor.unit,
    )
    copy_facts(db, row, ancestor.facts)
    db.commit()
    return row
