"""Normalization over HTTP: stateless (`POST /history/normalize`) and the session's active
history (`GET /sessions/{id}/history`). Both write nothing."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any, NamedTuple, get_args

from cachetools import LRUCache
from fastapi import APIRouter, Query, Response
from sqlalchemy import Engine, Row
from sqlalchemy.orm import Session

from app.api.deps import AppSettings, Db, TenantId
from app.api.errors import ERROR_RESPONSES
from app.api.json_body import JsonRoute
from app.api.models import (
    HistoryResponse,
    Modality,
    NormalizeRequest,
    NormalizeResponse,
)
from app.api.responses import json_response
from app.domain import items as items_module
from app.domain.errors import InvalidInput
from app.domain.formats import from_responses, to_responses
from app.domain.items import Format, Item, visible_text
from app.domain.normalize import NormalizeResult, TruncationPolicy, normalize_history
from app.domain.world_state import apply_patch, is_state_fragment
from app.metrics import NORMALIZE_REPAIRS
from app.storage import repository
from app.storage.tables import SessionRow
from app.tokens import token_counter

router = APIRouter(route_class=JsonRoute, tags=["history"], responses=ERROR_RESPONSES)


@dataclass(frozen=True)
class Goal:
    version: int
    text: str


@dataclass(frozen=True)
class WorldState:
    version: int
    sections: dict[str, Any]
    baseline: dict[str, Any] | None
    """What was last sent to the model; None after a compaction (everything is re-sent)."""


@dataclass(frozen=True)
class ActiveHistory:
    """A session's active history before normalization, with the session facts beside it.

    Internal facts (goal versions, world-state snapshots, compactions) are folded into
    `goal`, `world_state` and `compactions` and never appear in `items`.
    """

    session_pk: int
    last_seq: int
    encoding: str
    context_window: int
    items: Sequence[Item]
    metadata: Sequence[dict[str, Any]]
    seqs: Sequence[int | None]
    """The fact each item is, verbatim; None for items a compaction wrote."""
    goal: Goal | None
    world_state: WorldState
    compactions: int
    compaction_id: str | None
    phases: Sequence[str | None]
    stored_tokens: Sequence[int | None]
    """Each item's token count in the session's encoding as stored when it was appended
    (`count(visible_text(item))`, see `facts.tokens`); None for items a compaction wrote or a
    fork inherited."""
    unit: str | None

    def token_counts(self, items: Sequence[Item], encoding: str) -> list[int]:
        """The token count of each of `items` (`count(visible_text(item))`) in `encoding`.

        In the session's encoding an item that is one of this history's own, unchanged
        (normalization returns untouched items as the same objects), takes its stored count;
        any other item, or any item in another encoding, is counted now. Identity is safe here:
        this history holds its items alive, so no other object shares an id with one of them.
        """
        count_tokens = token_counter(encoding)
        stored = (
            {
                id(item): tokens
                for item, tokens in zip(self.items, self.stored_tokens, strict=True)
                if tokens is not None
            }
            if encoding == self.encoding
            else {}
        )
        counts = [stored.get(id(item)) for item in items]
        return [
            count_tokens(visible_text(item)) if known is None else known
            for item, known in zip(items, counts, strict=True)
        ]


def load_session_and_history(
    db: Session,
    *,
    tenant_id: int,
    session_id: str,
    up_to_seq: int | None = None,
    lock: bool = False,
) -> tuple[SessionRow, ActiveHistory]:
    """The tenant's session row (locked when `lock` is set) and its active history, optionally
    as it was at `up_to_seq`."""
    row = repository.get_session(db, tenant_id=tenant_id, external_id=session_id, lock=lock)
    return row, project_active_history(db, row, up_to_seq=up_to_seq)


Visible = tuple[int | None, Item, dict[str, Any], str | None, int | None]
"""One model-visible entry: the fact's seq (None if a compaction wrote it), the item, its
append metadata, its phase and its stored token count (None where there is none)."""


@dataclass(frozen=True)
class _Fold:
    """A session's log folded up to `last_seq`. Never mutated once built: it is shared."""

    last_seq: int
    goal: Goal | None
    sections: dict[str, Any]
    baseline: dict[str, Any] | None
    world_version: int
    compactions: int
    compaction_id: str | None
    by_seq: dict[int, Visible]
    visible: tuple[Visible, ...]

    @functools.cached_property
    def columns(self) -> _Columns:
        """`visible` as columns, built once per fold (every session-mode call reads them)."""
        return _Columns(
            seqs=tuple(entry[0] for entry in self.visible),
            items=tuple(entry[1] for entry in self.visible),
            metadata=tuple(entry[2] for entry in self.visible),
            phases=tuple(entry[3] for entry in self.visible),
            tokens=tuple(entry[4] for entry in self.visible),
        )


class _Columns(NamedTuple):
    seqs: tuple[int | None, ...]
    items: tuple[Item, ...]
    metadata: tuple[dict[str, Any], ...]
    phases: tuple[str | None, ...]
    tokens: tuple[int | None, ...]


_EMPTY = _Fold(0, None, {}, None, 0, 0, None, {}, ())

# The log is append-only, so a fold up to seq n never changes: each process keeps the newest
# fold per session and only reads and folds the facts appended since. Keys carry the engine
# and the session's creation time, so two databases never share an entry. The engine is held
# by a weak reference: it hashes by identity (hashing its URL cost more than the lookup), it
# keeps no engine and its pool alive, and once dead it equals no other engine's reference.
# Bounded to the 64 most recently read sessions: a fold holds the session's visible items.
_folds: LRUCache[tuple[weakref.ref[Engine], int, datetime], _Fold] = LRUCache(maxsize=64)
_folds_lock = threading.Lock()


def _fold(start: _Fold, facts: Sequence[Row[Any]], *, last_seq: int) -> _Fold:
    goal, sections, baseline = start.goal, start.sections, start.baseline
    world_version, compactions, compaction_id = (
        start.world_version,
        start.compactions,
        start.compaction_id,
    )
    by_seq = dict(start.by_seq)
    visible = list(start.visible)
    for fact in facts:
        match fact.type:
            case items_module.GOAL_FACT:
                goal = Goal(version=fact.item["version"], text=fact.item["text"])
            case items_module.WORLD_STATE_FACT:
                if "snapshot" in fact.item:
                    sections = fact.item["snapshot"]
                else:
                    sections = apply_patch(sections, fact.item["patch"])
                world_version = fact.item["version"]
                baseline = sections
            case items_module.COMPACTION_FACT:
                # A compaction replaces the projection: entries name a fact by seq (verbatim)
                # or carry an item the compaction wrote. The log itself is untouched.
                compactions += 1
                compaction_id = fact.item.get("compaction_id")
                baseline = None
                visible = [
                    by_seq[entry["seq"]]
                    if "seq" in entry
                    else (None, entry["item"], {}, None, None)
                    for entry in fact.item.get("history", [])
                ]
            case internal if internal.startswith(items_module.INTERNAL_TYPE_PREFIX):
                pass  # links to child sessions and other bookkeeping: never model-visible
            case _:
                entry = (fact.seq, fact.item, fact.provenance, fact.phase, fact.tokens)
                by_seq[fact.seq] = entry
                visible.append(entry)
    return _Fold(
        last_seq,
        goal,
        sections,
        baseline,
        world_version,
        compactions,
        compaction_id,
        by_seq,
        tuple(visible),
    )


def project_active_history(
    db: Session, row: SessionRow | repository.SessionSnapshot, *, up_to_seq: int | None = None
) -> ActiveHistory:
    """Fold a session's facts into its active history, reusing this process's newest fold.

    A fork starts from its parent's active history as of the fork point (read from the
    parent's log, not copied), with only the world-state sections it declared inherited; its
    own facts follow. Items that come from the parent carry no seq of the child's.
    """
    target = row.last_seq if up_to_seq is None else min(up_to_seq, row.last_seq)
    key = (weakref.ref(db.get_bind().engine), row.id, row.created_at)
    with _folds_lock:
        cached = _folds.get(key)
    if cached is not None and cached.last_seq <= target:
        start = cached
    elif row.kind == "fork" and row.parent_id is not None:
        parent = project_active_history(
            db, repository.get_session_by_pk(db, row.parent_id), up_to_seq=row.fork_seq
        )
        # Governance travels only as declared: the parent's world-state fragments stay behind.
        start = replace(
            _EMPTY,
            goal=parent.goal,
            sections={k: v for k, v in parent.world_state.sections.items() if row.inherit.get(k)},
            world_version=parent.world_state.version,
            visible=tuple(
                (None, item, metadata, phase, None)
                for item, metadata, phase in zip(
                    parent.items, parent.metadata, parent.phases, strict=True
                )
                if not is_state_fragment(item)
            ),
        )
    else:
        start = _EMPTY
    if start.last_seq == target:
        fold = start  # nothing was appended since the cached fold
    else:
        facts = repository.read_facts(
            db, session_id=row.id, after_seq=start.last_seq, up_to_seq=target
        )
        fold = _fold(start, facts, last_seq=target)
    if up_to_seq is None and fold is not cached:
        with _folds_lock:
            _folds[key] = fold
    columns = fold.columns
    return ActiveHistory(
        session_pk=row.id,
        last_seq=target,
        encoding=row.encoding,
        context_window=row.context_window,
        items=columns.items,
        metadata=columns.metadata,
        seqs=columns.seqs,
        goal=fold.goal,
        world_state=WorldState(
            version=fold.world_version, sections=fold.sections, baseline=fold.baseline
        ),
        compactions=fold.compactions,
        compaction_id=fold.compaction_id,
        phases=columns.phases,
        stored_tokens=columns.tokens,
        unit=row.unit,
    )


def _respond(result: NormalizeResult, *, output_format: Format, tokens: int) -> dict[str, Any]:
    converted = from_responses(list(result.items), output_format)
    report = result.report.as_dict()
    for kind, entries in report.items():
        if entries:
            NORMALIZE_REPAIRS.labels(kind).inc(len(entries))
    return {
        "items": converted.items,
        "tokens": tokens,
        "report": report,
        "untranslated": converted.untranslated,
    }


@router.post("/history/normalize", response_model=NormalizeResponse)
def normalize(
    body: NormalizeRequest, tenant_id: TenantId, db: Db, settings: AppSettings
) -> Response:
    """Repairs a history (given, or a session's active one) and reports every repair.

    The answer is built as plain data and sent as is: validating megabytes of items against
    the response model would repeat work the repairs already guarantee.
    """
    if (body.items is None) == (body.session_id is None):
        raise InvalidInput(
            "give either `items` or `session_id`, not both and not neither",
            details=[{"loc": ["body"], "msg": "exactly one of items, session_id is required"}],
        )
    loaded: ActiveHistory | None = None
    if body.session_id is not None:
        _, loaded = load_session_and_history(db, tenant_id=tenant_id, session_id=body.session_id)
        items, metadata, encoding = loaded.items, loaded.metadata, loaded.encoding
    else:
        items, metadata = to_responses(body.items or [], body.format).items, []
        encoding = settings.default_encoding
    encoding = body.encoding or encoding
    result = normalize_history(
        items,
        count_tokens=token_counter(encoding),
        input_modalities=frozenset(body.input_modalities),
        truncation=TruncationPolicy(**body.truncation.model_dump()),
        item_metadata=metadata,
    )
    output_format = body.output_format or body.format
    if loaded is not None:
        sizes = loaded.token_counts(result.items, encoding)
    else:
        count_tokens = token_counter(encoding)
        sizes = [count_tokens(visible_text(item)) for item in result.items]
    return json_response(_respond(result, output_format=output_format, tokens=sum(sizes)))


@router.get("/sessions/{session_id}/history", response_model=HistoryResponse)
def get_history(
    session_id: str,
    tenant_id: TenantId,
    db: Db,
    output_format: Format = "responses",
    input_modalities: Annotated[str, Query(pattern=r"^[a-z,]*$")] = "text,image",
) -> Response:
    modalities = {m for m in input_modalities.split(",") if m}
    unknown = modalities - set(get_args(Modality))
    if unknown:
        raise InvalidInput(
            f"unknown input modalities: {', '.join(sorted(unknown))}",
            details=[{"loc": ["query", "input_modalities"], "msg": "unknown modality"}],
        )
    _, loaded = load_session_and_history(db, tenant_id=tenant_id, session_id=session_id)
    result = normalize_history(
        loaded.items,
        count_tokens=token_counter(loaded.encoding),
        input_modalities=frozenset(modalities),
        item_metadata=loaded.metadata,
    )
    return json_response(
        {
            **_respond(
                result,
                output_format=output_format,
                tokens=sum(loaded.token_counts(result.items, loaded.encoding)),
            ),
            "compaction_id": loaded.compaction_id,
        }
    )
