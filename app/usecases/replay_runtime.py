"""The runtime an evaluation replays (`app.usecases.evaluate`): on one scratch session, it
appends what the source log holds and makes each model call as `contextd_client`'s runtime
makes it (session-mode `/assemble`; `/compact` when the advice says so and the variant follows
it, then `/assemble` again), reports the simulated provider's cached tokens as usage, and
tallies what each context cost and showed (`app.domain.evaluation`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from app.contract.assembly import AssembleRequest
from app.contract.compaction import ClientSummary, CompactParams, CompactRequest
from app.contract.recall import RecallRequest
from app.contract.sessions import UsageRequest
from app.domain.compaction import PRODUCT_STRATEGIES, Strategy
from app.domain.evaluation import ServiceAnswer, VariantTally
from app.domain.facts import ActiveHistory
from app.domain.facts.kinds import COMPACTION_FACT, GOAL_FACT, NewFact
from app.domain.grounding import (
    ground,
    item_text,
    items_text,
    names_every_seq,
    needed_identifiers,
)
from app.domain.items import INTERNAL_TYPE_PREFIX, is_model_output, visible_text
from app.domain.json_encoding import encode_json
from app.hooks import HookCaller
from app.settings import Settings
from app.storage import cache_outcomes, fact_log, plans, session_rows
from app.storage.tables import SessionRow
from app.usecases import assemble as assembly
from app.usecases.compact import compact
from app.usecases.grounding import NextAction, grade_next_action
from app.usecases.plan_record import ReceivedRequest
from app.usecases.recall import recall
from app.usecases.usage import report_usage

__all__ = ["ReplayRuntime", "Variant", "copy_facts"]


@dataclass(frozen=True)
class Variant:
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


def copy_facts(db: Session, session: SessionRow, facts: Sequence[Any]) -> list[int]:
    """`facts` (another log's rows) appended to `session`'s log (locked by the caller's
    transaction), in runs of one unit, phase and time, each recorded when the original was;
    the seqs they were written at."""
    seqs: list[int] = []
    runs = itertools.groupby(facts, key=lambda f: (f.unit, f.phase, f.recorded_at))
    for (unit, phase, recorded_at), run in runs:
        rows = list(run)
        result = fact_log.append_facts(
            db,
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
        seqs.extend(fact.seq for fact in result.facts)
    return seqs


class ReplayRuntime:
    """A runtime on one scratch session: appends what the log holds, and makes each call as
    `contextd_client`'s runtime does."""

    def __init__(
        self,
        db: Session,
        *,
        tenant_id: int,
        session_id: str,
        variant: Variant,
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
        session = session_rows.get_session(
            self.db, tenant_id=self.tenant_id, external_id=self.session_id, lock=True
        )
        seqs = copy_facts(self.db, session, kept)
        self.db.commit()
        for seq, row in zip(seqs, kept, strict=True):
            self.texts[seq] = item_text(row.item)
            self._read(row)
        self._grade(kept, seqs)

    def inherit(self, active: ActiveHistory) -> None:
        """Starts from the history a fork inherited (`active`, before its own facts): its goal,
        and the text of its items as history before the first call."""
        if active.goal is not None:
            self.goal = active.goal.text
        for item in active.items:
            self._read_item(item)

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
        session = session_rows.get_session(
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
        elif not row.type.startswith(INTERNAL_TYPE_PREFIX):
            self._read_item(row.item)

    def _read_item(self, item: dict[str, Any]) -> None:
        if item.get("role") != "system":
            self.before += "\n" + item_text(item)
            if self.first_request is None and item.get("role") == "user":
                self.first_request = visible_text(item)

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
        predicted = answer["cache"]["reused_prefix_tokens"]
        served = self.tally.call(
            answer["messages"],
            [item["tokens"] for item in items],
            at=(self.clock - self.started).total_seconds(),
            goal=goal,
            grounding=grounding,
            elided_forms=[entry["form"] for entry in elided],
            service=ServiceAnswer(
                predicted_reused=predicted,
                restated=sum(item["tokens"] for item in items if item["id"].endswith("#restated")),
                history_cut=any(r["signal"] == "history_cut" for r in answer["advice"]["reasons"]),
                named_break=(answer["cache"].get("break") or {}).get("cause"),
                history_end=1
                + max((n for n, i in enumerate(items) if i["source"] == "history"), default=-1),
                seqs_named=names_every_seq(shown, [entry["first_seq"] for entry in elided]),
            ),
        )
        self._report_usage(
            answer["assembly_id"], cached=served.cached, served_less=served.cached < predicted
        )
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

    def _report_usage(self, assembly_id: str, *, cached: int, served_less: bool) -> None:
        """Reports the simulated provider's cached tokens for the call, as a runtime reports
        its provider's; a call served less than predicted adds the class the service gave it."""
        self.assembly_ids.append(assembly_id)
        report_usage(
            self.db,
            tenant_id=self.tenant_id,
            session_id=self.session_id,
            body=UsageRequest(assembly_id=assembly_id, cached_tokens=cached),
            settings=self.settings,
        )
        if served_less:
            self.tally.classified(cache_outcomes.outcome_of(self.db, self._stored(assembly_id)))

    def _stored(self, assembly_id: str) -> plans.StoredAssembly:
        session = session_rows.get_session(
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
