"""A session's active history, read from its log: the one loader every handler uses (read the
new facts → fold → normalize → count) and the per-process fold cache behind it.

The fold cache keeps read-your-writes: the log is append-only, so a fold up to seq n never
changes, and a read always folds every fact up to the session row's `last_seq` (or the
requested seq) onto the newest cached fold that does not go past it. Keys carry the engine and
the session's creation time, so two databases never share an entry. Pinned by
`tests/api/test_projection_cache.py` (incremental reads equal a fold from scratch).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from cachetools import LRUCache
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.domain.advice import Advice, advise_session
from app.domain.assemble import Contribution
from app.domain.calibration import SessionWindow
from app.domain.facts import EMPTY_FOLD, ActiveHistory, Fold, LoggedFact, fold_facts, fork_fold
from app.domain.items import Item
from app.domain.json_encoding import encode_json
from app.domain.normalize import (
    DEFAULT_MODALITIES,
    DEFAULT_TRUNCATION_POLICY,
    NormalizeResult,
    normalize_history,
)
from app.domain.recall import TOOLS_SOURCE_CLASS, recall_tool
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import state_contributions
from app.storage import repository
from app.storage.repository import SessionSnapshot
from app.storage.tables import SessionRow
from app.tokens import token_counter

FoldKey = tuple[weakref.ref[Engine], int, datetime]
DEFAULT_FOLD_CACHE_BYTES = 256 * 1024 * 1024

# The engine is held by a weak reference: it hashes by identity, keeps no engine and its pool
# alive, and once dead equals no other engine's reference. Bounded by the JSON bytes of the
# items the folds hold, most recently read first: one session of large tool outputs weighs as
# much as many small ones.
_folds: LRUCache[FoldKey, Fold] = LRUCache(
    maxsize=DEFAULT_FOLD_CACHE_BYTES, getsizeof=lambda fold: fold.held_bytes + 1
)
_folds_lock = threading.Lock()


def limit_fold_cache(max_bytes: int) -> None:
    """Bounds this process's fold cache to `max_bytes` (emptying it)."""
    global _folds
    with _folds_lock:
        _folds = LRUCache(maxsize=max_bytes, getsizeof=lambda fold: fold.held_bytes + 1)


def fold_session(
    db: Session, session: SessionRow | SessionSnapshot, *, up_to_seq: int | None = None
) -> ActiveHistory:
    """The session's active history (as it was at `up_to_seq`, when given), folding only the
    facts appended since this process's newest fold of it. A fork's fold starts from its
    parent's active history as of the fork point (read from the parent's log, not copied)."""
    target = session.last_seq if up_to_seq is None else min(up_to_seq, session.last_seq)
    key = (weakref.ref(db.get_bind().engine), session.id, session.created_at)
    with _folds_lock:
        cached = _folds.get(key)
    if cached is not None and cached.last_seq <= target:
        start = cached
    elif session.kind == "fork" and session.parent_id is not None:
        parent = repository.get_session_by_pk(db, session.parent_id)
        start = fork_fold(
            fold_session(db, parent, up_to_seq=session.fork_seq), inherit=session.inherit
        )
    else:
        start = EMPTY_FOLD
    if start.last_seq == target:
        fold = start  # nothing was appended since the cached fold
    else:
        facts = repository.read_facts(
            db, session_id=session.id, after_seq=start.last_seq, up_to_seq=target
        )
        # Rows carry every column the fold reads, by name.
        fold = fold_facts(start, cast(Sequence[LoggedFact], facts), last_seq=target)
    if up_to_seq is None and fold is not cached:
        with _folds_lock:
            # A fold larger than the whole cache is served, not kept.
            if fold.held_bytes < _folds.maxsize:
                _folds[key] = fold
            else:
                _folds.pop(key, None)
    return ActiveHistory.of(
        fold,
        session_pk=session.id,
        encoding=session.encoding,
        context_window=session.context_window,
        unit=session.unit,
    )


@dataclass(frozen=True)
class LoadedHistory:
    """A session's active history, and that history normalized, counted and advised on.

    Normalization and counts are computed on first use, once: handlers that only need the
    fold (goal, world state, children) never pay for them.
    """

    active: ActiveHistory
    encoding: str
    """The encoding the history is normalized and counted in."""
    input_modalities: frozenset[str]
    truncation: TruncationPolicy
    recall_tool: bool = False
    """Whether assemblies offer the recall tool: its definition is sent in the same window."""

    @functools.cached_property
    def normalized(self) -> NormalizeResult:
        return normalize_history(
            self.active.items,
            count_tokens=token_counter(self.encoding),
            input_modalities=self.input_modalities,
            truncation=self.truncation,
            item_metadata=self.active.metadata,
            seqs=self.active.seqs,
        )

    @property
    def items(self) -> tuple[Item, ...]:
        """The normalized active history."""
        return self.normalized.items

    @functools.cached_property
    def seqs(self) -> list[int | None]:
        """The fact each normalized item stands for (a truncated output: the output it cut);
        None for items the service wrote."""
        return [entry.seq for entry in self.active.entries(self.items)]

    @functools.cached_property
    def sizes(self) -> list[int]:
        """Each normalized item's tokens in `encoding` (stored counts where they apply)."""
        return self.active.token_counts(
            self.items, encoding=self.encoding, count_tokens=token_counter(self.encoding)
        )

    @functools.cached_property
    def session_sizes(self) -> list[int]:
        """Each normalized item's tokens in the session's own encoding (what advice weighs
        against the session's window)."""
        own = self.active.encoding
        if own == self.encoding:
            return self.sizes
        return self.active.token_counts(self.items, encoding=own, count_tokens=token_counter(own))

    @property
    def tokens(self) -> int:
        return sum(self.sizes)

    @functools.cached_property
    def state(self) -> tuple[Contribution, ...]:
        """The goal and world state as the candidates session-mode assembly pins, rendered once
        for both the assembly and the advice that weighs them."""
        return state_contributions(
            self.active.goal, self.active.world_state, history_tokens=self.tokens
        )

    @functools.cached_property
    def _state_by_source_class(self) -> dict[str, int]:
        count = token_counter(self.active.encoding)
        pinned: Counter[str] = Counter()
        for contribution in self.state:
            for candidate in contribution.candidates:
                tokens = count(candidate.content or "")
                if candidate.restate_at_end:  # restated by its restatement, else whole again
                    tokens += count(candidate.restatement or candidate.content or "")
                pinned[candidate.accounting_class] += tokens
        return dict(pinned)

    @functools.cached_property
    def tools_tokens(self) -> int:
        """Tokens, in the session's encoding, of the tool definitions assemblies offer."""
        if not self.recall_tool:
            return 0
        return token_counter(self.active.encoding)(encode_json(recall_tool("responses")).decode())

    def pinned_by_source_class(self, window: SessionWindow) -> dict[str, int]:
        """Tokens, in the session's encoding, of what session-mode assembly sends beside the
        history on every call, by source class: the goal (and its restatement), the world state
        and, as far as `window`'s fitted overhead does not hold them already, the tool
        definitions."""
        pinned = dict(self._state_by_source_class)
        if tools := window.tokenizer.beyond_overhead(self.tools_tokens):
            pinned[TOOLS_SOURCE_CLASS] = tools
        return dict(sorted(pinned.items()))

    def pinned_tokens(self, window: SessionWindow) -> int:
        return sum(self.pinned_by_source_class(window).values())

    def advice(self, window: SessionWindow) -> Advice:
        """Compaction advice for this history against the session's usable window, weighed in
        the session's encoding."""
        return advise_session(
            self.items,
            self.session_sizes,
            phases=self.active.phases,
            window=window.tokens,
            pinned_tokens=self.pinned_tokens(window),
            watermarks=window.watermarks,
            grown_since_compaction=self.active.grown_since_compaction,
        )


def load_history(
    db: Session,
    session: SessionRow | SessionSnapshot,
    *,
    up_to_seq: int | None = None,
    encoding: str | None = None,
    input_modalities: frozenset[str] = DEFAULT_MODALITIES,
    truncation: TruncationPolicy = DEFAULT_TRUNCATION_POLICY,
    recall_tool: bool | None = None,
) -> LoadedHistory:
    """`session`'s active history (at `up_to_seq`), to be normalized and counted in `encoding`
    (default: the session's) for a model that reads `input_modalities`, with the recall tool
    offered or not (default: as the session was created)."""
    return LoadedHistory(
        active=fold_session(db, session, up_to_seq=up_to_seq),
        encoding=encoding or session.encoding,
        input_modalities=input_modalities,
        truncation=truncation,
        recall_tool=session.attributes.get("recall_tool", True)
        if recall_tool is None
        else recall_tool,
    )
