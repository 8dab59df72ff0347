"""Typed tables.

`facts` is the append-only log: its primary key `(session_id, seq)` makes a duplicate
sequence number impossible, and database triggers (see the first migration) refuse every
UPDATE and DELETE on it in both PostgreSQL and SQLite.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    literal_column,
    or_,
    select,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import ColumnElement

from app.domain.facts.kinds import COMPACTION_FACT
from app.domain.items import MAX_TYPE_LENGTH

# Plain JSON, not JSONB, on PostgreSQL too: it keeps the document exactly as received (key
# order included) and accepts the \u0000 escapes real tool outputs contain; nothing queries
# inside these documents.
JsonDocument = JSON()
# SQLite has no BIGINT autoincrement; INTEGER PRIMARY KEY is its 64-bit rowid.
Identity = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp read back as an aware UTC datetime from both engines: SQLite keeps no zone,
    and PostgreSQL answers in the connection's zone."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JsonDocument,
        datetime: UtcDateTime(),
    }


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(Identity, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime]


class ApiKey(Base):
    """An API key, stored only as its SHA-256; the key itself is shown once at creation."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Identity, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(Identity, ForeignKey("tenants.id"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    """A revoked key is kept, so that the service never turns open when the last key goes."""


class SessionRow(Base):
    """A session. `external_id` is the id clients use, unique per tenant only.

    `id` is the session key, the column every session-scoped table is keyed (and would be
    sharded) on: derived from the tenant and `external_id` (`app.domain.ids.session_key`) for
    every session created since migration 20261205_0011, so that a lookup by name carries it;
    sessions created before keep the id the sequence gave them (their facts cannot be
    rewritten). A name is unique per tenant by construction, not by a constraint: a derived key
    is the primary key, and a name is looked up (`session_rows.IS_NAMED_SESSION`) before it is
    created. The sequence still numbers sessions the client did not name.
    """

    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_tenant_external", "tenant_id", "external_id"),)

    id: Mapped[int] = mapped_column(Identity, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(Identity, ForeignKey("tenants.id"))
    external_id: Mapped[str | None] = mapped_column(String(200))
    encoding: Mapped[str] = mapped_column(String(32))
    context_window: Mapped[int]
    model: Mapped[str | None] = mapped_column(String(200))
    attributes: Mapped[dict[str, Any]]
    """Client metadata and hook URLs, as given at creation."""
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime]
    parent_id: Mapped[int | None] = mapped_column(Identity, ForeignKey("sessions.id"))
    kind: Mapped[str] = mapped_column(String(16), default="root")
    """root | delegate | fork"""
    fork_seq: Mapped[int | None] = mapped_column(BigInteger)
    """For a fork: the parent's last seq at the fork point (its history is shared up to it)."""
    inherit: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    unit: Mapped[str | None] = mapped_column(String(200))
    calibration: Mapped[dict[str, Any] | None]
    """The session's model of provider tokens (overhead + ratio per encoding token) and the
    moments it is fitted from, learnt from usage reports (see
    `app.domain.calibration.Tokenizer.state`, which also reads the older ratio-only shape);
    None until a report calibrates it."""


class Fact(Base):
    """One item of a session's log, in Responses form, with what was sent in another format."""

    __tablename__ = "facts"
    __table_args__ = (Index("ix_facts_idempotency", "session_id", "idempotency_key"),)

    session_id: Mapped[int] = mapped_column(Identity, ForeignKey("sessions.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(MAX_TYPE_LENGTH))
    item: Mapped[dict[str, Any]]
    tokens: Mapped[int]
    unit: Mapped[str | None] = mapped_column(String(200))
    phase: Mapped[str | None] = mapped_column(String(200))
    provenance: Mapped[dict[str, Any]]
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    recorded_at: Mapped[datetime]
    original: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """For an item sent as Chat or Anthropic: its message as sent (see `facts.client_batch`)."""
    timeline: Mapped[int | None]
    """The PostgreSQL timeline that wrote the fact, set by the server (the column's default,
    migration `20261206_0014`): a promoted standby writes on a new one, so a seq given again
    after an asynchronous failover is told apart by it. NULL on SQLite and for facts written
    before it was recorded."""


class CheckpointRow(Base):
    """A link of a session's checkpoint (`app.storage.checkpoints`): its fold and what is
    derived from it as of `last_seq`, written whole (`previous_seq` None) or as a delta against
    the link at `previous_seq`, whose body hashes to `previous_digest`. Derived data, not facts:
    a newer whole link makes the older links of its session go, any may be deleted at any time,
    and each is checked against `body_digest`, `derivation` and `log_digest` before use."""

    __tablename__ = "checkpoints"

    session_id: Mapped[int] = mapped_column(Identity, ForeignKey("sessions.id"), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    base_seq: Mapped[int] = mapped_column(BigInteger)
    """The seq of the whole link the chain starts from (`last_seq`, for a whole one)."""
    previous_seq: Mapped[int | None] = mapped_column(BigInteger)
    previous_digest: Mapped[str | None] = mapped_column(String(64))
    derivation: Mapped[str] = mapped_column(String(64))
    """The digest of the code that derived the body: another code derives it again."""
    log_digest: Mapped[str] = mapped_column(String(64))
    """The digest of the session's fact at `last_seq`: a log that no longer holds that fact
    (a database restored to another state) is not the one the body was derived from."""
    body_digest: Mapped[str] = mapped_column(String(64))
    body: Mapped[bytes] = mapped_column(LargeBinary)
    index_digest: Mapped[str | None] = mapped_column(String(64))
    index_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    """A whole link's: the grader's occurrence index of the log, as the writer held it (None
    where it held none), read only by a worker's first grade of the session."""
    created_at: Mapped[datetime] = mapped_column(index=True)
    """Retention drops the links of a session whose newest link is older than it keeps."""


class EvaluationRow(Base):
    """An evaluation run as a job (`app.usecases.evaluation_jobs`): its state, its progress and,
    once done, its answer. Its runner writes `updated_at` as it goes; a running job whose
    `updated_at` stopped moving lost its process. Rows are updated as the job moves on."""

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_tenant_status", "tenant_id", "status"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Derived from the tenant, the session, the log's last seq and the request: the same
    evaluation asked twice is one job."""
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    session_id: Mapped[str] = mapped_column(String(200))
    """The session's name, as the caller gave it."""
    status: Mapped[str] = mapped_column(String(16))
    calls_done: Mapped[int] = mapped_column(BigInteger)
    calls_total: Mapped[int] = mapped_column(BigInteger)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AssemblyRow(Base):
    """One stored assembly: the request as received, the response and plan as returned.

    Plans are not facts: retention may delete them (`app.storage.retention`). On PostgreSQL the
    table is partitioned by week of `created_at` (a partition per week, `assemblies_pYYYYMMDD`
    for the week starting that Monday, UTC, and `assemblies_default` for a row no partition
    takes), so plans age out a week at a time; its primary key and unique constraint therefore
    carry `created_at`, and `session_key` too, the key a sharded database distributes every
    session-scoped table on. `id` alone is unique (the sequence never repeats a value), and so
    is the public id derived from it. On SQLite, never partitioned, `id` is the primary key
    (the rowid, assigned on insert).
    """

    __tablename__ = "assemblies"
    __table_args__ = (
        PrimaryKeyConstraint("id", "session_key", "created_at"),
        UniqueConstraint(
            "tenant_id",
            "external_id",
            "session_key",
            "created_at",
            name="uq_assemblies_external_id",
        ),
        Index("ix_assemblies_created_at", "created_at"),
        {"postgresql_partition_by": "RANGE (created_at)"},
    )

    id: Mapped[int] = mapped_column(Identity, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(Identity, ForeignKey("tenants.id"))
    external_id: Mapped[str | None] = mapped_column(String(64))
    session_id: Mapped[int | None] = mapped_column(Identity, ForeignKey("sessions.id"))
    session_key: Mapped[int] = mapped_column(BigInteger)
    """The session's row id, or for a stateless assembly `ids.stateless_session_key`."""
    as_of_seq: Mapped[int | None] = mapped_column(BigInteger)
    unit: Mapped[str | None] = mapped_column(String(200))
    phase: Mapped[str | None] = mapped_column(String(200))
    plan_hash: Mapped[str] = mapped_column(String(64))
    request: Mapped[str] = mapped_column(Text)
    """The request body exactly as received (JSON text)."""
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprints: Mapped[Any] = mapped_column(JSON)
    """[fingerprint, tokens] of each selected item in position order (prompt-cache reuse)."""
    prefix_state: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True))
    """What its prompt prefix was built from (`app.domain.assemble.cache_break.PrefixState`),
    for the lineage's next assembly to name why the reused prefix broke; None before it was
    kept."""
    cache_outcome: Mapped[str | None] = mapped_column(String(32))
    """The class of the provider's prompt-cache outcome (`app.domain.prompt_cache`), once a
    usage report names this assembly."""
    base_id: Mapped[int | None] = mapped_column(BigInteger)
    """The plan of the same lineage, stored whole, that this one's `response` and
    `fingerprints` are deltas against (`app.domain.json_delta`); None: they are stored whole."""
    created_at: Mapped[datetime]
    grounding: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    """How the assembly served its model's next action (`ActionGrounding.as_dict`), written once
    when that output is appended; None until then."""


def week_of(moment: datetime) -> date:
    """The Monday (UTC) starting the week `moment` falls in: the week whose partition holds a
    plan created then."""
    day = moment.astimezone(UTC).date()
    return day - timedelta(days=day.weekday())


LINEAGE_SESSION: ColumnElement[int] = AssemblyRow.session_key.expression
LINEAGE_UNIT: ColumnElement[str] = func.coalesce(AssemblyRow.unit, literal_column("''"))
"""An assembly's lineage is (tenant, session key, unit); a NULL unit maps to '' so that the
latest assembly of a lineage is one backward step in `ix_assemblies_lineage_key`."""


def previous_call_filter(
    session_id: Any, *, last_seq: Any, up_to_seq: Any = None
) -> ColumnElement[bool]:
    """Which of a session lineage's assemblies can have been the call before one made when the
    session's log ended at `last_seq` (as of `up_to_seq`, default: all of it): every one but
    those a compaction superseded.

    An assembly followed by a compaction and nothing else (no fact other than compactions
    appended since) was not sent: the runtime compacted when advised, then assembled again,
    so the provider last saw the lineage's assembly before it."""
    newest = select(Fact.seq).where(Fact.session_id == session_id, Fact.type != COMPACTION_FACT)
    if up_to_seq is not None:
        newest = newest.where(Fact.seq <= up_to_seq)
    # Correlated with the enclosing query's session where `session_id` is its column.
    turn_seq = newest.order_by(Fact.seq.desc()).limit(1).correlate_except(Fact).scalar_subquery()
    return or_(AssemblyRow.as_of_seq < turn_seq, AssemblyRow.as_of_seq >= last_seq)


Index(
    "ix_assemblies_lineage_key",
    AssemblyRow.tenant_id,
    LINEAGE_SESSION,
    LINEAGE_UNIT,
    AssemblyRow.id,
)


class Manifest(Base):
    """One version of a tenant's load manifest: what every call loads by default, by role."""

    __tablename__ = "manifests"

    tenant_id: Mapped[int] = mapped_column(Identity, ForeignKey("tenants.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]


class CandidateBody(Base):
    """A candidate's body (its `content` or `item`, as JSON) that stored requests name by
    digest (`app.domain.addressing`), once per session key (a session's, or its tenant's
    stateless one: `app.domain.ids`). Not a fact: retention deletes bodies no kept plan can name
    (`app.storage.bodies`)."""

    __tablename__ = "candidate_bodies"
    __table_args__ = (Index("ix_candidate_bodies_created_at", "created_at"),)

    session_key: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tenant_id: Mapped[int] = mapped_column(Identity, ForeignKey("tenants.id"), primary_key=True)
    digest: Mapped[str] = mapped_column(String(32), primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    """When a plan last found the body older than `bodies.REFRESH` (or first stored it)."""
