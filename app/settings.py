"""Service settings, read once from the environment (prefix `CTX_`) or a `.env` file."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, IPvAnyNetwork, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.domain.advice import Watermarks

MIB = 1024 * 1024


DEFAULT_FOLD_CACHE_BYTES = 256 * 1024 * 1024
"""What a process keeps of session folds by default (`fold_cache_bytes`)."""


class Settings(BaseSettings):
    """Every tunable of the service. Defaults give a zero-setup single-tenant SQLite service."""

    model_config = SettingsConfigDict(
        env_prefix="CTX_", env_file=".env", extra="ignore", populate_by_name=True
    )

    database_url: str = Field(
        default_factory=lambda: f"sqlite:///{Path.cwd() / 'contextd.db'}",
        description="SQLAlchemy URL; PostgreSQL in production (postgresql+psycopg://...).",
    )
    host: str = "127.0.0.1"
    port: int = 8000
    default_encoding: str = "o200k_base"
    default_context_window: int = 200_000
    max_body_bytes: int = 32 * MIB
    max_item_bytes: int = 4 * MIB
    max_items_per_request: int = 10_000
    max_json_depth: int = Field(
        default=128,
        ge=2,
        le=192,
        description="Levels a request body may nest (the body itself is level 1). At most 192:"
        " a stored request is read again by a parser that stops at 200 levels, and answers wrap"
        " stored items a few levels deeper under orjson's 254.",
    )
    api_keys: list[str] = Field(
        default_factory=list,
        description="Static 'tenant:key' pairs, in addition to the keys stored in the database.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description="When set, /metrics asks for it as a bearer token (the series name every "
        "tenant's units and phases).",
    )
    api_key_cache_seconds: float = Field(
        default=30.0,
        ge=0.0,
        description="How long a process trusts a key it resolved: a revoked key stops working "
        "within this time.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0.0,
        description="How long a request's whole body may take to arrive (then 408, and the "
        "connection is closed).",
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="Bytes a request's line and headers may take (`contextd serve`); beyond, "
        "a 431 and the connection is closed.",
    )
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0.0,
        description="How long a request's line and headers may take to arrive, from the "
        "connection or the previous response (`contextd serve`); then a 408 and the connection "
        "is closed.",
    )
    access_log: bool = Field(
        default=False,
        description="Log a line per request (uvicorn's access log). Off by default: every"
        " request is counted and timed per route in /metrics, and the line costs CPU on every"
        " request.",
    )
    db_pool_size: int = Field(default=10, ge=1)
    worker_threads: int = Field(
        default=40,
        ge=1,
        description="Threads a process runs handlers in (anyio's default); work after an answer "
        "has threads of its own, one per database connection.",
    )
    db_timeout_seconds: float = 5.0
    retry_after_seconds: int = 5
    token_cache_entries: int = 100_000
    fold_cache_bytes: int = Field(
        default=DEFAULT_FOLD_CACHE_BYTES,
        ge=0,
        description="JSON bytes of session folds a process keeps for incremental reads.",
    )
    checkpoint_every_facts: int = Field(
        default=32,
        ge=0,
        description="Facts a session's log grows by between two links of its checkpoint (0: "
        "no checkpoints written or read): a worker new to the session folds at most this many "
        "beyond the newest link.",
    )
    checkpoint_from_facts: int = Field(
        default=1_000,
        ge=1,
        description="Model-visible facts a session's log holds before it is checkpointed: a "
        "shorter one is folded from its log in about the time a restore takes.",
    )
    checkpoint_retention_days: int = Field(
        default=30,
        ge=1,
        description="A session's checkpoint whose newest link is older goes with retention: a "
        "session resumed after that folds its log once.",
    )
    shutdown_checkpoint_seconds: float = Field(
        default=10.0,
        ge=0,
        description="At shutdown, how long the process may spend writing the checkpoints of "
        "the sessions it holds that grew since their last one (newest read first).",
    )
    output_reserve_tokens: int = Field(
        default=16_000, description="Window kept free for the model's output in session mode."
    )
    compaction_high_watermark: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        validation_alias=AliasChoices(
            "CTX_COMPACTION_HIGH_WATERMARK", "CTX_COMPACTION_PRESSURE_THRESHOLD"
        ),
        description="Share of the usable window at which compaction is advised.",
    )
    compaction_low_watermark: float = Field(
        default=0.25,
        gt=0.0,
        lt=1.0,
        validation_alias=AliasChoices("CTX_COMPACTION_LOW_WATERMARK"),
        description="Share of the usable window a session compaction brings the context down to.",
    )
    compaction_min_gain: float = Field(
        default=0.1,
        ge=0.0,
        lt=1.0,
        description="Share of the active history's tokens a compaction must remove to be"
        " written; one that frees less is answered and not applied.",
    )
    near_duplicate_threshold: float = 0.9
    retrieval_recall_cap: int = 20
    assembly_retention_days: int = 30
    assembly_retention_per_session: int = 1000
    assembly_retention_per_tenant: int = Field(
        default=1_000_000,
        ge=1,
        description="Stored plans kept per tenant, newest first, whatever their sessions keep.",
    )
    assembly_retention_batch: int = Field(
        default=5_000,
        ge=1,
        description="Plans one retention statement deletes at most; a round deletes in such"
        " batches, each committed, so that none holds its locks for long.",
    )
    assembly_cleanup_interval_seconds: float = 300.0
    hook_timeout_seconds: float = Field(
        default=5.0,
        gt=0.0,
        description="Deadline of a whole hook call: connecting, sending and reading the answer.",
    )
    hook_max_answer_bytes: int = Field(
        default=64 * 1024, gt=0, description="A hook answer longer than this is a failed call."
    )
    hook_allowed_networks: list[IPvAnyNetwork] = Field(
        default_factory=list,
        description="Networks hooks may reach besides public addresses (CIDRs, such as"
        ' ["10.20.0.0/16"]; ["127.0.0.1/32"] for a hook on the same machine).',
    )
    hook_max_concurrent_per_tenant: int = Field(
        default=4,
        ge=1,
        description="Hook calls of one tenant in flight per process; beyond, a hook is not"
        " called and the session's failure policy applies.",
    )
    evaluate_max_facts: int = Field(
        default=50_000,
        ge=1,
        description="Facts a session may hold for `POST /sessions/{id}/evaluate` to replay it;"
        " a longer log is a 413 before any work.",
    )
    evaluate_max_calls: int = Field(
        default=20_000,
        ge=1,
        description="Model calls one evaluation may replay, over all its variants (the"
        " session's own settings included); beyond, a 413 before any work.",
    )
    evaluate_sync_calls: int = Field(
        default=500,
        ge=0,
        description="Model calls an evaluation may replay (over all its variants) and still be"
        " answered at once; beyond, or when the request says `Prefer: respond-async`, it runs"
        " as a job (202, `Location: /evaluations/{id}`).",
    )
    evaluate_job_workers: int = Field(
        default=2, ge=1, description="Threads running evaluation jobs in each process."
    )
    evaluate_progress_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often at most a running job writes its progress (which also says it"
        " is alive) and reads whether it was cancelled.",
    )
    evaluate_lost_after_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A running job whose progress has not moved for this long lost its"
        " process (a restart, a crash), and is answered `failed`, saying so.",
    )
    evaluate_max_concurrent_per_tenant: int = Field(
        default=1,
        ge=1,
        description="Evaluations of one tenant under way at once per process; beyond, a 429"
        " with Retry-After, so that one tenant's replays cannot take every worker thread.",
    )
    recall_max_tokens: int = Field(
        default=16_000, ge=16, description="Tokens one recall window may hold, at most."
    )
    recall_max_lines: int = Field(
        default=2_000, ge=1, description="Lines one recall window may hold, at most."
    )
    recall_max_matches: int = Field(
        default=200, ge=1, description="Matching lines one recall search may list, at most."
    )
    recall_max_scan_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="Bytes of text one recall search gives its pattern before it stops and says"
        " where to go on (a byte searched twice counts twice).",
    )
    recall_max_concurrent_per_tenant: int = Field(
        default=4,
        ge=1,
        description="Recall searches of one tenant under way at once per process; beyond, a "
        "search is a 429 with Retry-After, so that one tenant's searches cannot take every "
        "worker thread.",
    )
    recall_max_scan_seconds: float = Field(
        default=1.0,
        gt=0,
        description="CPU seconds one recall search may spend matching before it stops and says"
        " where to go on: what bounds a pattern RE2 can only run on its slower engine.",
    )
    summarizer_url: str | None = Field(
        default=None,
        description="OpenAI-compatible base URL (…/v1) of the `llm` summarizer; unset: disabled.",
    )
    summarizer_model: str = "gpt-4o-mini"
    summarizer_api_key: str | None = None
    summarizer_timeout_seconds: float = 60.0

    @model_validator(mode="after")
    def _watermarks_in_order(self) -> Settings:
        self.watermarks  # noqa: B018 - raises on inverted watermarks
        return self

    @property
    def watermarks(self) -> Watermarks:
        """The service-wide compaction watermarks (a session may set its own)."""
        return Watermarks(high=self.compaction_high_watermark, low=self.compaction_low_watermark)
