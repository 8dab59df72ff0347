"""A client's batch appended to a named session (`POST /sessions/{id}/items`), in as few round
trips as the guarantees allow.

The guarantees are `fact_log.append_facts`'s under the session's lock: seqs follow the
session's `last_seq`, consecutive, without gap or duplicate under any concurrency; a refused
batch (`expected_last_seq` not the session's last, another batch under its idempotency key, a
value the database refuses) writes nothing; a key used again with the same batch replays it as
first written; another tenant's session is not found.

Three ways write a batch, each for a reason that remains:

- **One statement** (PostgreSQL, `_append_statement`, defined once in SQLAlchemy): it reads the
  session's row, looks for the key's facts, bumps `last_seq` (waiting for the row's lock) and
  inserts after it, in one round trip, in autocommit on a pooled connection's driver connection
  (or in the caller's transaction, when one is open). Its answer means the facts are committed.
  It writes nothing under an encoding other than the session's (the guess is the default, or
  what this process learnt), and a keyed batch whose session moved between the statement's
  snapshot and its lock is left to the locked way, since the key's own batch may have come in.
- **The same statement on the event loop** (`append_on_the_loop`, a `LoopPool` connection): a
  small batch needs no worker thread, whose hop costs a good share of the append
  (`docs/performance.md`).
- **The locked way** (`fact_log.append_facts` after `SELECT ... FOR UPDATE`): SQLite, and the
  keyed batches the statement leaves.

A `SessionBatch` is what the ways share: the facts, the statement, and what the answer means.
Every connection keeps the engine's bounds (`app.storage.database`): the request's wait budget,
the answer deadline, driver errors raised as SQLAlchemy's, a disconnect invalidating the
connection. Pinned by `tests/integration/test_append_path.py` and
`tests/integration/test_append_on_the_loop.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Integer,
    Select,
    String,
    Text,
    bindparam,
    case,
    cast,
    column,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    true,
    update,
)
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.domain.errors import SequenceConflict, session_not_found
from app.domain.facts import NewFact
from app.domain.names import is_session_id
from app.storage.database import dump_json
from app.storage.fact_log import AppendResult, append_facts, replay_batch
from app.storage.groundings import ungraded_as_of_seq
from app.storage.loop_pool import LoopPool, LoopPoolBusy
from app.storage.session_rows import IS_NAMED_SESSION, get_session
from app.storage.tables import Fact, SessionRow, UtcDateTime


@dataclass(frozen=True)
class SessionAppend:
    """An append to a named session: what was written (or replayed), the session's row id and
    its own unit, and, when asked, the lineage's assembly still to grade."""

    result: AppendResult
    session_pk: int
    session_unit: str | None
    ungraded_as_of_seq: int | None
    """With `grade`, for a batch written: the `as_of_seq` of the lineage's latest assembly as
    the append found it, when that one is a session-mode assembly still ungraded
    (`groundings.ungraded_as_of_seq`); else None."""


_ENCODINGS: dict[tuple[int, str], str] = {}
"""The encodings of sessions this process found not to use the encoding it guessed, by tenant
and name: a hint only, since the append statement writes nothing under another encoding than
the session's (a wrong hint costs one statement more). Cleared when full."""
_MAX_ENCODINGS = 100_000

# The append statement, built once (`append_to_session`). The named session's row as this
# statement's snapshot has it; the row it updates is the newest version, locked.
_NAMED = (
    select(
        SessionRow.id,
        SessionRow.tenant_id,
        SessionRow.last_seq,
        SessionRow.encoding,
        SessionRow.unit,
    )
    .where(*IS_NAMED_SESSION)
    .cte("named")
)
_KEY = bindparam("idempotency_key", type_=String)
_COUNT = bindparam("count", type_=BigInteger)
_UNIT = bindparam("unit", type_=String)
_KEY_USED = exists().where(Fact.session_id == _NAMED.c.id, Fact.idempotency_key == _KEY)
# The sessions table as the update sees it: only the columns it touches, since SQLAlchemy sets
# every column of an UPDATE's table that a parameter of the statement is named after (here
# `tenant_id` and `external_id`, which name the session).
_SEQS = table(SessionRow.__tablename__, column("id", BigInteger), column("last_seq", BigInteger))
_BUMPED = (
    update(_SEQS)
    .where(
        _SEQS.c.id == _NAMED.c.id,
        _NAMED.c.encoding == bindparam("encoding", type_=String),  # the facts' tokens'
        _SEQS.c.last_seq
        == func.coalesce(bindparam("expected_last_seq", type_=BigInteger), _SEQS.c.last_seq),
        ~_KEY_USED,
        # The key was looked for in the snapshot: a keyed batch is written only if nothing was
        # appended since, else what came in between may be the key's own batch.
        or_(_KEY.is_(None), _SEQS.c.last_seq == _NAMED.c.last_seq),
    )
    .values(last_seq=_SEQS.c.last_seq + _COUNT)
    .returning((_SEQS.c.last_seq - _COUNT).label("after_seq"))
    .cte("bumped")
)
_FACT_COLUMNS = [
    "session_id",
    "seq",
    "type",
    "item",
    "tokens",
    "unit",
    "phase",
    "provenance",
    "idempotency_key",
    "recorded_at",
    "original",
]


def _fact_values(
    offset: Any, type_: Any, item: Any, tokens: Any, provenance: Any, original: Any
) -> list[Any]:
    """The values of one fact row, in `_FACT_COLUMNS` order, after the bumped `last_seq`."""
    return [
        _NAMED.c.id,
        _BUMPED.c.after_seq + offset,
        type_,
        item,
        tokens,
        _UNIT,
        bindparam("phase", type_=String),
        provenance,
        _KEY,
        bindparam("recorded_at", type_=UtcDateTime()),
        original,
    ]


# Any batch in one statement text (prepared once per connection), the batch in five JSON
# arrays, not SQL arrays (which psycopg would dump element by element, escaping each):
# `json_array_elements` slices out each document as written (parsing nothing again, so
# `\u0000` escapes pass), `json_array_elements_text` the types and token counts.
_TYPES, _TOKENS = (
    func.json_array_elements_text(cast(bindparam(name, type_=Text), JSON))
    .table_valued("value", with_ordinality="n")
    .render_derived(name=name)
    for name in ("types", "tokens")
)
_ITEMS, _PROVENANCES, _ORIGINALS = (
    func.json_array_elements(cast(bindparam(name, type_=Text), JSON))
    .table_valued("value", with_ordinality="n")
    .render_derived(name=name)
    for name in ("items", "provenances", "originals")
)
_BATCH_ROWS = (
    select(
        *_fact_values(
            _TYPES.c.n,
            _TYPES.c.value,
            _ITEMS.c.value,
            cast(_TOKENS.c.value, Integer),
            _PROVENANCES.c.value,
            _ORIGINALS.c.value,
        )
    )
    .select_from(_NAMED)
    .join(_BUMPED, true())
    .join(_TYPES, true())
    .join(_TOKENS, _TOKENS.c.n == _TYPES.c.n)
    .join(_ITEMS, _ITEMS.c.n == _TYPES.c.n)
    .join(_PROVENANCES, _PROVENANCES.c.n == _TYPES.c.n)
    .join(_ORIGINALS, _ORIGINALS.c.n == _TYPES.c.n)
)
# One fact, the most frequent append (an agent appends each item as it comes), as plain
# parameters: no function scans and joins to plan and run (a fifth of the statement's CPU in
# PostgreSQL). A text cast to JSON is kept as written, as `json_array_elements` keeps it.
_ONE_ROW = (
    select(
        *_fact_values(
            1,
            bindparam("fact_type", type_=String),
            cast(bindparam("fact_item", type_=Text), JSON),
            bindparam("fact_tokens", type_=Integer),
            cast(bindparam("fact_provenance", type_=Text), JSON),
            cast(bindparam("fact_original", type_=Text), JSON),
        )
    )
    .select_from(_NAMED)
    .join(_BUMPED, true())
)
_LINEAGE_UNGRADED = ungraded_as_of_seq(
    _NAMED.c.tenant_id,
    _NAMED.c.id,
    # The call's unit, else the session's own (a child session's calls are its unit's).
    func.coalesce(_UNIT, _NAMED.c.unit, literal_column("''")),
)


def _append_statement(rows: Select[Any]) -> tuple[str, dict[str, Any]]:
    """The append statement writing `rows`, compiled once: its text, and the values its
    definition binds itself (a sharding bound, a limit)."""
    inserted = insert(Fact).from_select(_FACT_COLUMNS, rows).returning(Fact.timeline)
    inserted_cte = inserted.cte("inserted")
    statement = select(
        _NAMED.c.id,
        _NAMED.c.last_seq,
        _NAMED.c.encoding,
        _NAMED.c.unit,
        select(_BUMPED.c.after_seq).scalar_subquery().label("after_seq"),
        _KEY_USED.label("key_used"),
        case((bindparam("grade", type_=Boolean), _LINEAGE_UNGRADED)).label("ungraded_as_of_seq"),
        # One statement, one timeline: the server's default gave every row the same.
        select(inserted_cte.c.timeline).limit(1).scalar_subquery().label("timeline"),
    ).add_cte(inserted_cte)
    compiled = statement.compile(dialect=PGDialect_psycopg())  # type: ignore[no-untyped-call]
    return str(compiled), {
        name: value for name, value in compiled.params.items() if value is not None
    }


_APPEND_SQL, _APPEND_CONSTANTS = _append_statement(_BATCH_ROWS)
_APPEND_ONE_SQL, _APPEND_ONE_CONSTANTS = _append_statement(_ONE_ROW)


@dataclass(frozen=True)
class SessionBatch:
    """A batch to append to the tenant's session `session_id`, as `append_facts` would under
    the session's lock: after the session's last seq, refused whole when `expected_last_seq`
    is not it, replayed when `idempotency_key` wrote this batch already. `facts_for(encoding)`
    are its facts counted in an encoding; `encoding_guess` is the one tried first (the session's
    own is known only once its row is read). With `grade`, the append also says which assembly
    of the lineage is still to grade.

    It is what the append's two ways share (`append_to_session`, in a worker thread, and
    `append_on_the_loop`): the statement in an encoding (its form and parameters), and what
    its answer means."""

    tenant_id: int
    session_id: str
    facts_for: Callable[[str], Sequence[NewFact]]
    encoding_guess: str
    unit: str | None
    phase: str | None
    idempotency_key: str | None
    expected_last_seq: int | None
    grade: bool
    recorded_at: datetime
    """When the batch is recorded, by the service's clock (`app.clock`)."""

    def first_encoding(self) -> str:
        """The guess, unless this process learnt the session counts in another encoding."""
        return _ENCODINGS.get((self.tenant_id, self.session_id), self.encoding_guess)

    def statement(self, encoding: str, facts: Sequence[NewFact]) -> tuple[str, dict[str, Any]]:
        """The one statement for `facts`, counted in `encoding`: its text (the one-fact form for
        a single fact) and its parameters."""
        common = {
            "tenant_id": self.tenant_id,
            "external_id": self.session_id,
            "encoding": encoding,
            "expected_last_seq": self.expected_last_seq,
            "idempotency_key": self.idempotency_key,
            "count": len(facts),
            "unit": self.unit,
            "phase": self.phase,
            "recorded_at": self.recorded_at,
            "grade": self.grade,
        }
        if len(facts) == 1:
            (fact,) = facts
            return _APPEND_ONE_SQL, {
                **_APPEND_ONE_CONSTANTS,
                **common,
                "fact_type": fact.type,
                "fact_tokens": fact.tokens,
                "fact_item": dump_json(fact.item),
                "fact_provenance": dump_json(fact.provenance),
                # JSON null, not SQL NULL, as `append_facts` stores a missing original.
                "fact_original": dump_json(fact.original),
            }
        return _APPEND_SQL, {
            **_APPEND_CONSTANTS,
            **common,
            "types": dump_json([fact.type for fact in facts]),
            "tokens": dump_json([fact.tokens for fact in facts]),
            "items": dump_json([fact.item for fact in facts]),
            "provenances": dump_json([fact.provenance for fact in facts]),
            # JSON null, not SQL NULL, as `append_facts` stores a missing original.
            "originals": dump_json([fact.original for fact in facts]),
        }

    def recount(self, found: Sequence[Any] | None, encoding: str) -> str | None:
        """The session's encoding when the answer `found` says the batch, counted in
        `encoding`, was not written for being counted in another (remembered for the next
        batch); None when the answer stands. Raises `NotFound` for no session."""
        if found is None:
            raise session_not_found(self.session_id)
        found_encoding: str = found[2]
        if found_encoding == encoding:
            return None
        if len(_ENCODINGS) >= _MAX_ENCODINGS:
            _ENCODINGS.clear()
        _ENCODINGS[(self.tenant_id, self.session_id)] = found_encoding
        return found_encoding

    def written(self, found: Sequence[Any], facts: Sequence[NewFact]) -> SessionAppend | None:
        """The append, when the answer says the batch was written; None when it was not: the
        key's batch is to be replayed (`key_used`) or a keyed batch must take the locked way.
        Raises `SequenceConflict` for an `expected_last_seq` that is not the session's last."""
        session_pk, last_seq, _, session_unit, after_seq, key_used, ungraded, timeline = found
        if after_seq is not None:
            return SessionAppend(
                AppendResult.written(after_seq + 1, facts, timeline=timeline),
                session_pk,
                session_unit,
                ungraded,
            )
        if not key_used and self.expected_last_seq not in (None, last_seq):
            raise SequenceConflict(expected=self.expected_last_seq, actual=last_seq)
        return None


def append_to_session(db: Session, batch: SessionBatch) -> SessionAppend:
    """Append `batch` (facts counted in the session's encoding) in `db`.

    On PostgreSQL, outside a transaction, one statement in autocommit does it all (its answer
    means the facts are committed): the session's row, the key's use, the bump of `last_seq`,
    the insert and, with `grade`, the lineage's assembly still to grade; the batch is counted in
    its `encoding_guess` unless this process knows the session's encoding to be another. Only
    a keyed batch in a session appended to between the statement's snapshot and its row lock
    goes the locked way (SQLite's always), in a transaction the caller commits.
    """
    if not is_session_id(batch.session_id):
        raise session_not_found(batch.session_id)
    if db.get_bind().engine.dialect.name == "postgresql":
        appended = _append_in_one_statement(db, batch)
        if appended is not None:
            return appended
    session = get_session(db, tenant_id=batch.tenant_id, external_id=batch.session_id, lock=True)
    result = append_facts(
        db,
        session=session,
        facts=batch.facts_for(session.encoding),
        unit=batch.unit,
        phase=batch.phase,
        idempotency_key=batch.idempotency_key,
        expected_last_seq=batch.expected_last_seq,
        recorded_at=batch.recorded_at,
    )
    ungraded = None
    if batch.grade and not result.replayed:
        lineage = (batch.tenant_id, session.id, batch.unit or session.unit or "")
        ungraded = db.scalar(select(ungraded_as_of_seq(*lineage)))
    return SessionAppend(result, session.id, session.unit, ungraded)


async def append_on_the_loop(pool: LoopPool, batch: SessionBatch) -> SessionAppend | None:
    """`append_to_session`'s one statement on a connection of the event loop's `pool`, in
    autocommit, with the same guarantees and errors; None when the batch was not written and
    `append_to_session` is to take it (a key's batch to replay, a keyed batch that must take the
    locked way, no connection of `pool` free: `LoopPoolBusy`): it runs the statement again,
    which then answers as it does."""
    if not is_session_id(batch.session_id):
        raise session_not_found(batch.session_id)
    encoding = batch.first_encoding()
    while True:
        facts = batch.facts_for(encoding)
        sql, parameters = batch.statement(encoding, facts)
        try:
            async with pool.connection(sql) as connection:
                cursor = await connection.execute(sql, parameters)
                found = await cursor.fetchone()
        except LoopPoolBusy:
            return None
        recount = batch.recount(found, encoding)
        if recount is None:
            assert found is not None  # `recount` raises for none
            return batch.written(found, facts)
        encoding = recount


def _append_in_one_statement(db: Session, batch: SessionBatch) -> SessionAppend | None:
    """`append_to_session`'s statement (again, under the session's encoding when the guess was
    another): in `db`'s transaction when it has one, else in autocommit on a pooled connection
    of its own; None when a keyed batch must take the locked way."""
    encoding = batch.first_encoding()
    while True:
        facts = batch.facts_for(encoding)
        sql, parameters = batch.statement(encoding, facts)
        if db.in_transaction():
            found = db.connection().exec_driver_sql(sql, parameters).one_or_none()
        else:
            with _pooled_in_autocommit(db.get_bind().engine, sql) as connection:
                found = connection.execute(sql, parameters).fetchone()
        recount = batch.recount(found, encoding)
        if recount is None:
            break
        encoding = recount
    assert found is not None  # `recount` raises for none
    appended = batch.written(found, facts)
    session_pk, _, _, session_unit, _, key_used, _, _ = found
    if appended is not None or not key_used:
        return appended
    assert batch.idempotency_key is not None  # a key is used only when one was given
    replayed = replay_batch(
        db,
        session_pk=session_pk,
        facts=facts,
        unit=batch.unit,
        phase=batch.phase,
        idempotency_key=batch.idempotency_key,
    )
    # The statement saw the key's facts, committed, and facts are never deleted.
    assert replayed is not None
    return SessionAppend(replayed, session_pk, session_unit, None)


@contextmanager
def _pooled_in_autocommit(engine: Engine, statement: str) -> Iterator[psycopg.Connection[Any]]:
    """The driver's connection of one of `engine`'s pooled connections, in autocommit (each
    statement commits as it answers), given back to the pool as it came. The driver's errors
    are raised as SQLAlchemy raises them (`DBAPIError.instance`); a disconnect invalidates the
    connection, and the pool's older connections at their next checkout, as SQLAlchemy does."""
    try:
        pooled = engine.raw_connection()
    except psycopg.Error as error:
        raise DBAPIError.instance(
            None, None, error, psycopg.Error, dialect=engine.dialect
        ) from error
    connection: psycopg.Connection[Any] = pooled.dbapi_connection  # type: ignore[assignment]
    try:
        connection.autocommit = True
        yield connection
    except psycopg.Error as error:
        is_disconnect = engine.dialect.is_disconnect(
            error,  # type: ignore[arg-type]
            pooled.dbapi_connection,
            None,
        )
        if is_disconnect:
            engine.pool._invalidate(pooled, error)
        raise DBAPIError.instance(
            statement,
            None,
            error,
            psycopg.Error,
            connection_invalidated=is_disconnect,
            dialect=engine.dialect,
        ) from error
    finally:
        if pooled.is_valid and connection.autocommit:
            try:
                connection.autocommit = False
            except psycopg.Error as error:
                pooled.invalidate(error)  # never back to the pool in autocommit
        pooled.close()
