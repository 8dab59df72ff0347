"""`POST /sessions/{id}/evaluate`: a session's logged turns replayed as a runtime would make
them, under the session's own settings and under named variants of them, and what each would
have cost and shown (`app.domain.evaluation`).

The replay runs on a scratch store (`app.storage.scratch`): a session of its own per variant,
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
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from app import metrics
from app.contract.assembly import AssembleRequest
from app.contract.compaction import ClientSummary, CompactParams, CompactRequest
from app.contract.evaluation import CURRENT, EvaluateRequest, EvaluateVariant
from app.contract.recall import RecallRequest
from app.contract.sessions import SessionHooks, UsageRequest
from app.domain.advice import Watermarks
from app.domain.compaction import DEFAULT_KEEP_RECENT, PRODUCT_STRATEGIES, Strategy
from app.domain.errors import PayloadTooLarge, RuleBroken, TenantBusy
from app.domain.evaluation import ServiceAnswer, VariantTally
from app.domain.facts.kinds import COMPACTION_FACT, GOAL_FACT, NewFact
from app.domain.grounding import (
    ground,
    item_text,
    items_text,
    names_every_seq,
    needed_identifiers,
)
from app.domain.ids import derive_id
from app.domain.items import INTERNAL_TYPE_PREFIX, is_model_output, visible_text
from app.domain.json_encoding import encode_json
from app.domain.prompt_cache import CACHE_TERMS
from app.hooks import HookCaller
from app.settings import Settings
from app.storage import cache_outcomes, plans, repository
from app.storage.scratch import scratch_store
from app.storage.tables import SessionRow
from app.tenant_slots import TenantSlots
from app.usecases import assemble as assembly
from app.usecases.compact import compact
from app.usecases.grounding import NextAction, grade_next_action
from app.usecases.history import session_watermarks, session_window
from app.usecases.plan_record import ReceivedRequest
from app.usecases.recall import recall
from app.usecases.usage import report_usage

__all__ = ["Prepared", "evaluating", "prepare", "run", "tenant_busy"]

evaluating = TenantSlots()
"""Each tenant's evaluations under way in this process, run now or as jobs."""


@dataclass(frozen=True)
class _Variant:
    """A variant with every setting resolved against the session's."""

    name: str
    context_window: int
    strategy: Strategy | None
    high_watermark: float
    low_watermark: float
    keep_recent: int
    follow_advice: bool
    recall_tool: bool
    cache: dict[str, Any]
    """The session's `cache` terms, as the variant tells the service them."""
    summarizer: Literal["builtin", "client"]

    def settings(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if key != "name"}


@dataclass(frozen=True)
class _Call:
    """One model call of the log: the facts before it, and the text of what it produced."""

    facts: tuple[Any, ...]
    """The facts logged since the previous call (the log's rows), to append before it."""
    output_text: str


@dataclass(frozen=True)
class Prepared:
    """An evaluation read and checked, not yet run: the log's calls and the variants."""

    session: SessionRow
    session_id: str
    calls: tuple[_Call, ...]
    rest: tuple[Any, ...]
    variants: tuple[_Variant, ...]
    opened_at: datetime
    """When the log's first fact was recorded (the session's creation, for an empty log): the
    replay's clock before any fact is copied."""

    @property
    def calls_total(self) -> int:
        """The calls the replay makes over all its variants."""
        return len(self.calls) * len(self.variants)


def prepare(
    db: Session, *, tenant_id: int, session_id: str, body: EvaluateRequest, settings: Settings
) -> Prepared:
    """The session's log and the request's variants, checked against the limits (module
    docstring) before any work; the transaction that read them ended."""
    session = repository.get_session(db, tenant_id=tenant_id, external_id=session_id)
    if session.last_seq > settings.evaluate_max_facts:
        raise PayloadTooLarge(
            f"session {session_id!r} holds {session.last_seq} facts; an evaluation replays at"
            f" most {settings.evaluate_max_facts} (CTX_EVALUATE_MAX_FACTS)"
        )
    facts = repository.read_facts(db, session_id=session.id, up_to_seq=session.last_seq)
    db.rollback()  # the replay holds no transaction of the service's store
    calls, rest = _calls(facts)
    variants = tuple(
        _resolved(variant, number, session, settings)
        for number, variant in enumerate(_with_current(body))
    )
    opened_at = facts[0].recorded_at if facts else session.created_at
    prepared = Prepared(session, session_id, tuple(calls), rest, variants, opened_at)
    if prepared.calls_total > settings.evaluate_max_calls:
        raise PayloadTooLarge(
            f"{len(variants)} variants of {len(calls)} calls make {prepared.calls_total}"
            f" replayed calls; an evaluation replays at most {settings.evaluate_max_calls}"
            " (CTX_EVALUATE_MAX_CALLS): evaluate fewer variants at once"
        )
    return prepared


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
) -> _Variant:
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
    return _Variant(
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
    variant: _Variant, prepared: Prepared, *, settings: Settings, after_call: Callable[[], None]
) -> dict[str, Any]:
    """One variant's replay, on a scratch store of its own where the session has the tenant
    and the name it has here (so the same ids), and its figures."""
    source, name = prepared.session, prepared.session_id
    with (
        scratch_store(settings, tenant_id=source.tenant_id) as (scratch, sessions),
        sessions() as db,
    ):
        session, _ = repository.create_session(
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
        )
        db.commit()
        window = session_window(scratch, session)
        # The provider is the session's, whatever the variant tells the service of it.
        provider = CACHE_TERMS[window.tokenizer.family].with_overrides(
            source.attributes.get("cache", {})
        )
        runtime = _Runtime(
            db,
            tenant_id=source.tenant_id,
            session_id=name,
            variant=variant,
            settings=scratch,
            tally=VariantTally(window=window.tokens, terms=provider),
            opened_at=prepared.opened_at,
        )
        for call in prepared.calls:
            runtime.append(call.facts)
            runtime.call(call.output_text)
            after_call()
        runtime.append(prepared.rest)
        runtime.read_grades()
        return {"name": variant.name, "settings": variant.settings(), **runtime.tally.figures()}


class _Runtime:
    """A runtime on one scratch session: appends what the log holds, and makes each call as
    `contextd_client`'s runtime does."""

    def __init__(
        self,
        db: Session,
        *,
        tenant_id: int,
        session_id: str,
        variant: _Variant,
        settings: Settings,
        tally: VariantTally,
        opened_at: datetime,
    ) -> None:
        self.db, self.tenant_id, self.session_id = db, tenant_id, session_id
        self.variant, self.settings, self.tally = variant, settings, tally
        self.hooks = HookCaller(settings)
        self.texts: dict[int, str] = {}
        """Each scratch fact's text, by its seq, for what an `elided` entry holds."""
        self.before = ""
        """The text of the history before the next call (system messages left out)."""
        self.goal: str | None = None
        self.first_request: str | None = None
        self.assembly_ids: list[str] = []
        self.recorded_summary: str | None = None
        """The narrative of the newest compaction the log recorded with a summarizer of its
        own, until a replayed compaction uses it."""
        self.recalled: dict[tuple[str, int, int], bool] = {}
        self.started = self.clock = opened_at
        """The replay's clock: when the newest fact copied was recorded."""

    def append(self, facts: Sequence[Any]) -> None:
        """Copies `facts` (the source's rows) into the scratch log, in runs of one unit, phase
        and time (each recorded when the source's was), leaving out the source's compactions."""
        kept = [fact for fact in facts if fact.type != COMPACTION_FACT]
        for fact in facts:
            if fact.type == COMPACTION_FACT and (fact.item.get("summary") or {}).get("narrative"):
                self.recorded_summary = fact.item["summary"]["narrative"]
        seqs: list[int] = []
        runs = itertools.groupby(kept, key=lambda f: (f.unit, f.phase, f.recorded_at))
        for (unit, phase, recorded_at), run in runs:
            rows = list(run)
            session = repository.get_session(
                self.db, tenant_id=self.tenant_id, external_id=self.session_id, lock=True
            )
            result = repository.append_facts(
                self.db,
                session=session,
                facts=[
                    NewFact(
                        type=row.type,
                        item=row.item,
                        tokens=row.tokens,
                        provenance=row.provenance,
                        original=row.original,
                    )
                    for row in rows
                ],
                unit=unit,
                phase=phase,
                recorded_at=recorded_at,
            )
            self.db.commit()
            for appended, row in zip(result.facts, rows, strict=True):
                self.texts[appended.seq] = item_text(row.item)
                seqs.append(appended.seq)
                self._read(row)
        self._grade(kept, seqs)

    def _grade(self, facts: Sequence[Any], seqs: Sequence[int]) -> None:
        """What an append of `facts` (written at `seqs`) does after answering: the model's
        output among them grades the assembly before it (`grade_next_action`), whose grade a
        later compaction reads."""
        visible = [
            (fact, seq)
            for fact, seq in zip(facts, seqs, strict=True)
            if not fact.type.startswith(INTERNAL_TYPE_PREFIX)
        ]
        start = next((n for n, (fact, _) in enumerate(visible) if is_model_output(fact.item)), None)
        if start is None:
            return
        run = list(itertools.takewhile(lambda pair: is_model_output(pair[0].item), visible[start:]))
        first, first_seq = run[0]
        session = repository.get_session(
            self.db, tenant_id=self.tenant_id, external_id=self.session_id
        )
        grade_next_action(
            self.db,
            session_pk=session.id,
            tenant_id=self.tenant_id,
            unit=first.unit or session.unit,
            action=NextAction(items=tuple(fact.item for fact, _ in run), first_seq=first_seq),
            batch_last_seq=seqs[-1],
        )

    def _read(self, row: Any) -> None:
        self.clock = row.recorded_at
        if row.type == GOAL_FACT:
            self.goal = row.item["text"]
        elif not row.type.startswith(INTERNAL_TYPE_PREFIX) and row.item.get("role") != "system":
            self.before += "\n" + item_text(row.item)
            if self.first_request is None and row.item.get("role") == "user":
                self.first_request = visible_text(row.item)

    def call(self, output_text: str) -> None:
        """The runtime's step before one model call, and the context it would send, tallied."""
        answer = self._assemble()
        advice = answer["advice"]
        strategy = self.variant.strategy or advice["recommended_strategy"]
        advised = self.variant.follow_advice and advice["should_compact"] and strategy
        if advised and self._compact(strategy):
            answer = self._assemble()
        goal = self.goal or self.first_request
        needed = needed_identifiers(output_text, history=self.before, goal=goal or "")
        elided = answer["elided"]
        shown = items_text(answer["messages"])
        grounding = ground(
            needed, shown=shown, elided=[self._elided_text(entry) for entry in elided]
        )
        items = answer["items"]
        served_less = self.tally.call(
            answer["messages"],
            [item["tokens"] for item in items],
            at=(self.clock - self.started).total_seconds(),
            goal=goal,
            grounding=grounding,
            elided_forms=[entry["form"] for entry in elided],
            service=ServiceAnswer(
                predicted_reused=answer["cache"]["reused_prefix_tokens"],
                restated=sum(item["tokens"] for item in items if item["id"].endswith("#restated")),
                history_cut=any(r["signal"] == "history_cut" for r in answer["advice"]["reasons"]),
                named_break=(answer["cache"].get("break") or {}).get("cause"),
                history_end=1
                + max((n for n, i in enumerate(items) if i["source"] == "history"), default=-1),
                seqs_named=names_every_seq(shown, [entry["first_seq"] for entry in elided]),
            ),
        )
        self._report_usage(answer["assembly_id"], served_less=served_less)
        for identifier, index in grounding.recallable.items():
            self.tally.recall_checked_for(self._recalls(identifier, elided[index]))

    def _compact(self, strategy: Strategy) -> bool:
        """The advised compaction, with the log's recorded summary where the variant asks for
        it and one is left (`recorded_summary`); whether it applied."""
        summary = None
        if self.variant.summarizer == "client" and strategy in PRODUCT_STRATEGIES:
            summary = self.recorded_summary
        compacted = compact(
            self.db,
            tenant_id=self.tenant_id,
            body=CompactRequest(
                session_id=self.session_id,
                strategy=strategy,
                params=CompactParams(
                    keep_recent=self.variant.keep_recent,
                    summarizer="client" if summary else "builtin",
                ),
                summary=ClientSummary(text=summary) if summary else None,
            ),
            settings=self.settings,
            hook_caller=self.hooks,
            now=self.clock,
        )
        self.db.commit()
        if compacted.applied:
            self.tally.compactions += 1
            if summary:
                self.tally.recorded_summaries += 1
                self.recorded_summary = None
        return compacted.applied

    def _report_usage(self, assembly_id: str, *, served_less: bool) -> None:
        """Reports the simulated provider's cached tokens for the call, as a runtime reports
        its provider's; a call served less than predicted adds the class the service gave it."""
        self.assembly_ids.append(assembly_id)
        report_usage(
            self.db,
            tenant_id=self.tenant_id,
            session_id=self.session_id,
            body=UsageRequest(assembly_id=assembly_id, cached_tokens=self.tally.last_cached),
            settings=self.settings,
        )
        if served_less:
            self.tally.classified(cache_outcomes.outcome_of(self.db, self._stored(assembly_id)))

    def _stored(self, assembly_id: str) -> plans.StoredAssembly:
        session = repository.get_session(
            self.db, tenant_id=self.tenant_id, external_id=self.session_id
        )
        return plans.get_assembly(
            self.db, tenant_id=self.tenant_id, external_id=assembly_id, session_key=session.id
        )

    def _recalls(self, identifier: str, entry: dict[str, Any]) -> bool:
        """Whether `/recall`'s search of an elided entry's range hands `identifier` back."""
        first, last = int(entry["first_seq"]), int(entry["last_seq"])
        key = (identifier, first, last)
        if key not in self.recalled:
            found = False
            start_at: int | None = first
            while not found and start_at is not None:
                answer = recall(
                    self.db,
                    tenant_id=self.tenant_id,
                    session_id=self.session_id,
                    body=RecallRequest.model_validate(
                        {"from_seq": start_at, "to_seq": last, "pattern": re.escape(identifier)}
                    ),
                    settings=self.settings,
                )
                found = any(identifier in match.text for match in answer.matches)
                start_at = answer.next_from_seq
            self.recalled[key] = found
        return self.recalled[key]

    def read_grades(self) -> None:
        """Adds each assembly's own grade, made when its call's output was appended."""
        for assembly_id in self.assembly_ids:
            self.tally.graded(self._stored(assembly_id).grounding)

    def _assemble(self) -> dict[str, Any]:
        value = {"session_id": self.session_id}
        stored = assembly.assemble(
            self.db,
            tenant_id=self.tenant_id,
            request=AssembleRequest.model_validate(value),
            received=ReceivedRequest(body=encode_json(value), value=value),
            settings=self.settings,
            now=self.clock,
        )
        stored.after_answer()
        return stored.answer

    def _elided_text(self, entry: dict[str, Any]) -> str:
        first, last = int(entry["first_seq"]), int(entry["last_seq"])
        return "\n".join(self.texts[s] for s in range(first, last + 1) if s in self.texts)
