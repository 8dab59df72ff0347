"""A session's history as the use cases see it: loaded through storage, normalized, counted
and advised on; and the session's window under this service's settings.

`load_history` reads the fold (`app.storage.folds`, cached per process); normalization and
counts are computed on first use, once, so a use case that only needs the fold (goal, world
state, children) never pays for them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from app.clock import seconds_between
from app.domain.advice import Advice, HistoryFigures, Watermarks, advise, history_figures
from app.domain.advice_figures import digest_of, figures_of
from app.domain.assemble import Contribution
from app.domain.budget import usable_window
from app.domain.calibration import SessionWindow, session_tokenizer
from app.domain.elision import Elided, Shown, elided
from app.domain.facts import ActiveHistory
from app.domain.history import HistoryEntry
from app.domain.items import Item
from app.domain.json_encoding import encode_json
from app.domain.normalize import DEFAULT_MODALITIES, DEFAULT_TRUNCATION_POLICY, NormalizeResult
from app.domain.prompt_cache import CACHE_TERMS, CacheStanding, CacheTerms
from app.domain.recall import TOOLS_SOURCE_CLASS, recall_tool
from app.domain.session_view import HistoryView, ViewSettings, active_columns, view_of
from app.domain.truncation import TruncationPolicy
from app.domain.world_state import state_contributions
from app.metrics import record_checkpoint
from app.settings import Settings
from app.storage.folds import fold_session
from app.storage.session_rows import SessionSnapshot
from app.storage.tables import SessionRow
from app.tokens import model_encoding, token_counter

__all__ = [
    "LoadedHistory",
    "SessionColumns",
    "cache_standing",
    "load_history",
    "session_cache_terms",
    "session_watermarks",
    "session_window",
]


class SessionColumns(Protocol):
    """The columns of a session its window depends on: a session row has them, and so has the
    snapshot an assembly reads."""

    @property
    def encoding(self) -> str: ...
    @property
    def context_window(self) -> int: ...
    @property
    def model(self) -> str | None: ...
    @property
    def attributes(self) -> dict[str, Any]: ...
    @property
    def calibration(self) -> dict[str, Any] | None: ...


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
    def view(self) -> HistoryView:
        """The session view this history is normalized and counted in: the fold's own, kept
        with it and advanced by the facts appended since (`app.domain.session_view`)."""
        active = self.active
        key = (self.encoding, self.input_modalities, self.truncation)
        previous = active.views.get(key)
        view = view_of(
            previous,
            active_columns(active),
            settings=ViewSettings(
                count=token_counter(self.encoding),
                input_modalities=self.input_modalities,
                truncation=self.truncation,
                stored_counts=self.encoding == active.encoding,
            ),
        )
        _keep_furthest(active.views, key, view, progress=lambda view: (view.epoch, view.inputs))
        return view

    @functools.cached_property
    def normalized(self) -> NormalizeResult:
        """The whole normalized history and its report (for the answers that carry them)."""
        return self.view.result()

    @property
    def items(self) -> Sequence[Item]:
        """The normalized active history."""
        return self.view.items

    @property
    def seqs(self) -> Sequence[int | None]:
        """The fact each normalized item stands for (a truncated output: the output it cut);
        None for items the service wrote."""
        return self.view.seqs

    @property
    def sizes(self) -> Sequence[int]:
        """Each normalized item's tokens in `encoding` (stored counts where they apply)."""
        return self.view.tokens

    @functools.cached_property
    def session_sizes(self) -> Sequence[int]:
        """Each normalized item's tokens in the session's own encoding (what advice weighs
        against the session's window)."""
        own = self.active.encoding
        if own == self.encoding:
            return self.sizes
        return self.active.token_counts(self.items, encoding=own, count_tokens=token_counter(own))

    @property
    def tokens(self) -> int:
        """The tokens of the normalized history, all told."""
        return self.view.total_tokens

    @property
    def offered_positions(self) -> Sequence[int]:
        """The position in `items` of each item session-mode assembly offers as history: all but
        the world-state fragments, which the world state shows."""
        return self.view.offered_positions

    @functools.cached_property
    def offered_history(self) -> Sequence[HistoryEntry]:
        """The history session-mode assembly offers: the items at `offered_positions`, each read
        only when the assembly reaches it."""
        return self.view.offered_history()

    @property
    def offered_tokens(self) -> int:
        """The tokens of the offered history, all told."""
        return self.view.offered_tokens

    def elided(
        self, shown: Mapping[int, Shown], *, default_drop: str, record_tokens: int
    ) -> tuple[Elided, ...]:
        """What a context leaves out of this history (`app.domain.elision.elided`): `shown`
        says what it made of each row it shows, and of each row it drops for another reason
        than `default_drop`. The base statuses it reads are kept with the view."""
        key = ("elisions", self.encoding, self.input_modalities, self.truncation)
        # Kept with the log, not the epoch's views: a compaction's new epoch carries on from it.
        derived = self.active.logged.derived
        previous = derived.get(key)
        found, base = elided(
            previous,
            self.active,
            self.view,
            shown=shown,
            default_drop=default_drop,
            record_tokens=record_tokens,
        )
        view = self.view
        _keep_furthest(
            derived,
            key,
            base,
            progress=lambda base: (
                base.base.epoch,
                base.base.settled is view.settled,
                base.lengths,
            ),
        )
        return found

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

    def advice(self, window: SessionWindow, cache: CacheStanding | None = None) -> Advice:
        """Compaction advice for this history against the session's usable window, weighed in
        the session's encoding, and priced by the lineage's prompt cache when `cache` is given."""
        return advise(
            self.figures,
            pinned_tokens=self.pinned_tokens(window),
            window=window.tokens,
            phases=self.active.last_phases,
            watermarks=window.watermarks,
            grown_since_compaction=self.active.grown_since_compaction,
            cache=cache,
        )

    @functools.cached_property
    def figures(self) -> HistoryFigures:
        """What advice reads of this history, in the session's encoding: kept with the view as
        it advances (`app.domain.advice_figures`), or read whole in another encoding."""
        if self.encoding != self.active.encoding:
            return history_figures(self.items, self.session_sizes)
        key = ("advice", self.encoding, self.input_modalities, self.truncation)
        previous = self.active.views.get(key)
        digest = digest_of(previous, self.view)
        view = self.view
        _keep_furthest(
            self.active.views,
            key,
            digest,
            progress=lambda digest: (digest.running.settled is view.settled, digest.lengths),
        )
        return figures_of(digest, self.view)


_Kept = TypeVar("_Kept")


def _keep_furthest(
    store: dict[Any, Any],
    key: object,
    kept: _Kept,
    *,
    progress: Callable[[_Kept], tuple[Any, ...]],
) -> None:
    """Keeps `kept` under `key` for the next call to advance from, unless what is kept there has
    come further by `progress` (a replay of an earlier seq, say, must not set the next call
    back; what belongs to the current view always comes before what belongs to another)."""
    previous = store.get(key)
    if previous is None or progress(kept) >= progress(previous):
        store[key] = kept


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
        active=fold_session(db, session, up_to_seq=up_to_seq, on_checkpoint=record_checkpoint),
        encoding=encoding or session.encoding,
        input_modalities=input_modalities,
        truncation=truncation,
        recall_tool=session.attributes.get("recall_tool", True)
        if recall_tool is None
        else recall_tool,
    )


def session_watermarks(settings: Settings, options: Mapping[str, Any]) -> Watermarks:
    """A session's watermarks: its own `compaction` options, else the service's. Raises
    ValueError when they end up inverted."""
    return Watermarks(
        high=options.get("high_watermark") or settings.compaction_high_watermark,
        low=options.get("low_watermark") or settings.compaction_low_watermark,
    )


def session_window(settings: Settings, session: SessionColumns) -> SessionWindow:
    """The session's one window under this service's output reserve: in provider tokens, with
    its watermarks and the tokenizer that converts it into the session's encoding. Assembly,
    advice, compaction targets and every session answer take it from here."""
    usable = usable_window(session.context_window, output_reserve=settings.output_reserve_tokens)
    return SessionWindow(
        usable=usable,
        watermarks=session_watermarks(settings, session.attributes.get("compaction", {})),
        tokenizer=session_tokenizer(
            session.model,
            encoding=session.encoding,
            state=session.calibration,
            model_encoding=model_encoding,
            usable=usable,
        ),
    )


def session_cache_terms(session: SessionColumns, window: SessionWindow) -> CacheTerms:
    """The prompt-cache terms the session is judged by: its model family's
    (`app.domain.prompt_cache.CACHE_TERMS`) with its own `cache` overrides."""
    overrides = session.attributes.get("cache", {})
    return CACHE_TERMS[window.tokenizer.family].with_overrides(overrides)


def cache_standing(
    session: SessionColumns,
    window: SessionWindow,
    *,
    now: datetime,
    previous_call_at: datetime | None,
) -> CacheStanding:
    """The lineage's prompt cache for a call made `now`, its previous call made at
    `previous_call_at` (None: it had none), by the session's cache terms."""
    return CacheStanding(
        terms=session_cache_terms(session, window),
        idle_seconds=None
        if previous_call_at is None
        else max(0.0, seconds_between(now, previous_call_at)),
    )
