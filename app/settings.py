"""Service settings, read once from the environment (prefix `CTX_`) or a `.env` file."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class Settings(BaseSettings):
    """Every tunable of the service. Defaults give a zero-setup single-tenant SQLite service."""

    model_config = SettingsConfigDict(env_prefix="CTX_", env_file=".env", extra="ignore")

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
    api_keys: list[str] = Field(
        default_factory=list,
        description="Static 'tenant:key' pairs, in addition to the keys stored in the database.",
    )
    db_pool_size: int = 10
    db_timeout_seconds: float = 5.0
    retry_after_seconds: int = 5
    token_cache_entries: int = 100_000
