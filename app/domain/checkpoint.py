"""A checkpoint: a session's fold, and the views, advice figures and elision statuses derived
from it, as plain data a worker new to the session restores instead of folding the whole log.

A checkpoint is derived data. It holds no item a fact of the log holds (those are read from the
log when first read, `app.domain.facts.stored_items`), only the columns the fold and its views
keep per fact, and the items the service wrote (a compaction's placeholders, a fork's inherited
history). The storage shell keeps one per session and trusts none: it checks the body's hash,
the code that derived it and the log it was derived from before restoring it
(`app.storage.checkpoints`).

Invariants:

- `restored(checkpoint_of(fold), store)` folded on with the facts after `fold.last_seq` gives
  the same active history, session views, advice figures and elisions as a fold of the whole
  log (pinned at many seqs of every public run by `tests/unit/test_checkpoint.py`).
- Each derived part is kept only where it belongs to the fold's epoch and reads no more of the
  log than the fold holds; a part left out is derived again on first use, which costs time only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.advice_figures import FiguresDigest, digest_record, digest_restored
from app.domain.column_codec import Plain
from app.domain.elision import ElisionBase
from app.domain.facts import Fold
from app.domain.facts.columns import LoggedColumns, VisibleColumns
from app.domain.facts.stored_items import ItemStore
from app.domain.session_view import HistoryView, view_record, view_restored
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import Goal

__all__ = ["CHECKPOINT_FORMAT", "checkpoint_of", "restored"]

CHECKPOINT_FORMAT = 2
"""The shape of a checkpoint's body; a body of another shape is derived again."""

_VIEW, _ADVICE, _ELISIONS = "view", "advice", "elisions"


def checkpoint_of(fold: Fold) -> dict[str, Any]:
    """`fold` and what is derived from it as a checkpoint holds them (JSON-ready)."""
    views, digests, bases = [], [], []
    held = fold.views or {}
    for key, view in held.items():
        setting = _setting_of(key)
        if setting is None or not isinstance(view, HistoryView) or not _belongs(view, fold):
            continue
        views.append({"setting": setting, **view_record(view)})
        digest = held.get((_ADVICE, *key))
        if isinstance(digest, FiguresDigest) and digest.running.settled is view.settled:
            digests.append({"setting": setting, **digest_record(digest)})
        base = fold.logged.derived.get((_ELISIONS, *key))
        if (
            isinstance(base, ElisionBase)
            and base.base.settled is view.settled
            and base.lengths[0] <= fold.logged_length
        ):
            bases.append({"setting": setting, **base.record()})
    return {
        "format": CHECKPOINT_FORMAT,
        "last_seq": fold.last_seq,
        "goal": None if fold.goal is None else [fold.goal.version, fold.goal.text],
        # World state is a user's data: never looked into.
        "sections": Plain(fold.sections),
        "baseline": Plain(fold.baseline),
        "world_version": fold.world_version,
        "section_versions": Plain(fold.section_versions),
        "compactions": fold.compactions,
        "compaction_id": fold.compaction_id,
        "compacted_at": fold.compacted_at,
        "held_bytes": fold.held_bytes,
        "retracted": sorted(fold.retracted),
        "reset_at": fold.reset_at,
        "compacted_by": [[seq, *mark] for seq, mark in fold.compacted_by.items()],
        "epoch": fold.epoch,
        "logged": fold.logged.record(fold.logged_length, last_seq=fold.last_seq),
        "visible": fold.visible.record(fold.visible_length),
        "views": views,
        "digests": digests,
        "elisions": bases,
    }


def restored(record: Mapping[str, Any], store: ItemStore) -> Fold:
    """The fold `record` holds (`checkpoint_of`), its facts' items read from `store` when
    read. Raises ValueError (or the KeyError, TypeError of a malformed body) when it cannot."""
    if record.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"a checkpoint of format {record.get('format')!r}")
    logged = LoggedColumns.restored(record["logged"], store)
    visible = VisibleColumns.restored(record["visible"], store)
    views: dict[Any, Any] = {}
    settled_of: dict[Any, Any] = {}
    for entry in record["views"]:
        key = _key_of(entry["setting"])
        view = view_restored(entry, lambda seq: store.get(seq)[0])
        views[key], settled_of[key] = view, view.settled
    for entry in record["digests"]:
        key = _key_of(entry["setting"])
        views[(_ADVICE, *key)] = digest_restored(entry, settled_of[key])
    for entry in record["elisions"]:
        key = _key_of(entry["setting"])
        logged.derived[(_ELISIONS, *key)] = ElisionBase.restored(entry, settled_of[key])
    goal = record["goal"]
    return Fold(
        last_seq=record["last_seq"],
        goal=None if goal is None else Goal(version=goal[0], text=goal[1]),
        sections=record["sections"],
        baseline=record["baseline"],
        world_version=record["world_version"],
        compactions=record["compactions"],
        compaction_id=record["compaction_id"],
        logged=logged,
        logged_length=len(logged),
        visible=visible,
        visible_length=len(visible),
        compacted_at=record["compacted_at"],
        section_versions=record["section_versions"],
        held_bytes=record["held_bytes"],
        retracted=frozenset(record["retracted"]),
        reset_at=record["reset_at"],
        compacted_by={
            seq: (compaction, strategy) for seq, compaction, strategy in record["compacted_by"]
        },
        epoch=record["epoch"],
        views=views,
    )


def _belongs(view: HistoryView, fold: Fold) -> bool:
    """Whether `view` is a view of `fold`'s visible items (of its epoch, no further)."""
    return view.epoch == fold.epoch and view.inputs <= fold.visible_length


def _setting_of(key: object) -> dict[str, Any] | None:
    """A view's key (encoding, input modalities, truncation policy) as data; None for a key
    of another shape."""
    if not isinstance(key, tuple) or len(key) != 3:
        return None
    encoding, modalities, truncation = key
    if not (isinstance(encoding, str) and isinstance(truncation, TruncationPolicy)):
        return None
    return {
        "encoding": encoding,
        "modalities": sorted(modalities),
        "truncation": [truncation.mode, truncation.limit, truncation.serialization_margin],
    }


def _key_of(setting: Mapping[str, Any]) -> tuple[str, frozenset[str], TruncationPolicy]:
    mode, limit, margin = setting["truncation"]
    return (
        setting["encoding"],
        frozenset(setting["modalities"]),
        TruncationPolicy(mode=mode, limit=limit, serialization_margin=margin),
    )
