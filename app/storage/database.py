"""Engine construction, migrations and readiness.

SQLite transactions start with `BEGIN IMMEDIATE` so that two appenders serialise on the
write lock up front instead of failing on lock upgrade; PostgreSQL serialises appenders
with a row lock on the session (see `repository.append_facts`).

A PostgreSQL connection whose `info` has `HOLDS_SESSION_LOCKS` set releases every
session-level advisory lock it holds when it goes back to the pool, whichever way it goes
back (a failure to release invalidates it: closed, the server releases them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from app.domain.json_encoding import decode_json, encode_json
from app.settings import Settings

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
HOLDS_SESSION_LOCKS = "holds_session_locks"


def dump_json(value: Any) -> str:
    """The JSON columns' serializer (SQLAlchemy wants text)."""
    return encode_json(value).decode()


def create_db_engine(settings: Settings) -> Engine:
    url = settings.database_url
    json_options = {"json_serializer": dump_json, "json_deserializer": decode_json}
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": settings.db_timeout_seconds, "check_same_thread": False},
            **json_options,
        )
        _use_immediate_transactions(engine)
        return engine
    engine = create_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        # No pre-ping (it costs a round trip per request): a dropped connection fails one
        # request with 503, and SQLAlchemy then invalidates the whole pool, so the service
        # recovers by itself when the database returns.
        pool_pre_ping=False,
        pool_recycle=1800,
        **json_options,
        pool_timeout=settings.db_timeout_seconds,
        connect_args={
            "connect_timeout": max(1, int(settings.db_timeout_seconds)),
            "options": f"-c statement_timeout={int(settings.db_timeout_seconds * 1000)}",
        },
    )
    _release_session_locks_on_return(engine)
    return engine


def _release_session_locks_on_return(engine: Engine) -> None:
    @event.listens_for(engine, "reset")
    def _on_reset(dbapi_connection: Any, record: Any, _state: Any) -> None:
        if record.info.pop(HOLDS_SESSION_LOCKS, False):
            dbapi_connection.rollback()  # an aborted transaction would refuse the statement
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT pg_advisory_unlock_all()")
            cursor.close()


def _use_immediate_transactions(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision` (Alembic)."""
    command.upgrade(alembic_config(url), revision)


def is_migrated(engine: Engine) -> bool:
    """True when the database answers and sits at the newest migration."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        return MigrationContext.configure(connection).get_current_revision() == head
