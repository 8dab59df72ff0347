"""The `contextd` command line: migrate, serve, create-key, plan."""

from __future__ import annotations

import argparse
import ipaddress
import secrets
import sys

import uvicorn

from app.api.deps import hash_api_key
from app.settings import Settings
from app.storage import repository
from app.storage.database import create_db_engine, create_session_factory, migrate


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _has_keys(settings: Settings) -> bool:
    if settings.api_keys:
        return True
    engine = create_db_engine(settings)
    try:
        with create_session_factory(engine)() as db:
            return repository.has_api_keys(db)
    finally:
        engine.dispose()


def run_migrate(settings: Settings) -> int:
    migrate(settings.database_url)
    print("database migrated to head")
    return 0


def run_serve(settings: Settings, *, host: str, port: int, workers: int) -> int:
    if not is_loopback(host) and not _has_keys(settings):
        print(
            f"refusing to serve open (no API keys configured) on non-loopback address {host}; "
            "create a key with 'contextd create-key --tenant NAME' or set CTX_API_KEYS",
            file=sys.stderr,
        )
        return 2
    uvicorn.run("app.main:app", host=host, port=port, workers=workers, log_level="info")
    return 0


def run_create_key(settings: Settings, *, tenant: str) -> int:
    key = f"ctx_{secrets.token_urlsafe(32)}"
    engine = create_db_engine(settings)
    try:
        with create_session_factory(engine)() as db:
            tenant_id = repository.ensure_tenant(db, tenant)
            repository.add_api_key(db, tenant_id=tenant_id, key_hash=hash_api_key(key))
            db.commit()
    finally:
        engine.dispose()
    print(f"created an API key for tenant {tenant!r}; it is shown once, store it now:")
    print(key)
    return 0


def main(argv: list[str] | None = None) -> int:
    settings = Settings()
    parser = argparse.ArgumentParser(prog="contextd", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="upgrade the database in CTX_DATABASE_URL to head")
    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", default=settings.host)
    serve.add_argument("--port", type=int, default=settings.port)
    serve.add_argument("--workers", type=int, default=1)
    create_key = commands.add_parser("create-key", help="create a tenant API key and print it once")
    create_key.add_argument("--tenant", required=True)
    args = parser.parse_args(argv)
    match args.command:
        case "migrate":
            return run_migrate(settings)
        case "serve":
            return run_serve(settings, host=args.host, port=args.port, workers=args.workers)
        case "create-key":
            return run_create_key(settings, tenant=args.tenant)
        case _:
            parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
