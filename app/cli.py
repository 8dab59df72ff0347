"""The `contextd` command line: migrate, serve, create-key, list-keys, revoke-key, plan,
evaluate."""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import httpx
import uvicorn

from app.api.http_protocol import BoundedHttpProtocol
from app.domain.ids import hash_api_key
from app.domain.items import Format
from app.evaluate_files import run_evaluate
from app.settings import Settings
from app.storage import tenant_rows
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
            return tenant_rows.has_api_keys(db)
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
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Workers are separate processes: they share metric files so /metrics counts them all.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="contextd-metrics-")
    uvicorn.run(
        "app.main:app",
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        access_log=settings.access_log,
        http=BoundedHttpProtocol,
    )
    return 0


def run_create_key(settings: Settings, *, tenant: str) -> int:
    key = f"ctx_{secrets.token_urlsafe(32)}"
    key_hash = hash_api_key(key)
    engine = create_db_engine(settings)
    try:
        with create_session_factory(engine)() as db:
            tenant_id = tenant_rows.ensure_tenant(db, tenant)
            key_id = tenant_rows.add_api_key(db, tenant_id=tenant_id, key_hash=key_hash)
            db.commit()
    finally:
        engine.dispose()
    print(
        f"created API key {key_id} (fingerprint {key_hash[:12]}) for tenant {tenant!r}; "
        "it is shown once, store it now:"
    )
    print(key)
    return 0


def run_list_keys(settings: Settings, *, tenant: str | None) -> int:
    engine = create_db_engine(settings)
    try:
        with create_session_factory(engine)() as db:
            keys = tenant_rows.list_api_keys(db, tenant=tenant)
    finally:
        engine.dispose()
    print(f"{'id':>6}  {'fingerprint':<12}  {'created':<20}  {'revoked':<20}  tenant")
    for key in keys:
        revoked = _stamp(key.revoked_at) if key.revoked_at else "-"
        print(
            f"{key.id:>6}  {key.fingerprint:<12}  {_stamp(key.created_at):<20}  "
            f"{revoked:<20}  {key.tenant}"
        )
    return 0


def run_revoke_key(settings: Settings, *, key_id: int) -> int:
    engine = create_db_engine(settings)
    try:
        with create_session_factory(engine)() as db:
            revoked = tenant_rows.revoke_api_key(db, key_id)
            db.commit()
    finally:
        engine.dispose()
    if revoked is None:
        print(f"no API key {key_id}", file=sys.stderr)
        return 1
    print(
        f"revoked API key {key_id} (fingerprint {revoked.fingerprint}) of tenant "
        f"{revoked.tenant!r}; running processes refuse it within "
        f"{settings.api_key_cache_seconds:g} s (CTX_API_KEY_CACHE_SECONDS)"
    )
    return 0


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_plan(stored: dict[str, Any]) -> str:
    """A stored assembly as a table: every candidate, its decision, reason, tokens, position."""
    response = stored["response"]
    lines = [
        f"assembly {stored['assembly_id']}  plan_hash {response['plan_hash'][:16]}",
        f"total {response['total_tokens']} tokens  truncated={response['truncated']}  "
        f"over_budget={response['over_budget']}  reused prefix "
        f"{response['cache']['reused_prefix_tokens']} tokens",
        "",
        f"{'pos':>4}  {'decision':<8}  {'reason':<24}  {'tokens':>7}  {'score':>6}  "
        f"{'form':<9}  {'layer':<9}  {'source':<16}  id",
    ]
    ordered = sorted(response["plan"], key=lambda e: (e["position"] is None, e["position"] or 0))
    for entry in ordered:
        position = "-" if entry["position"] is None else str(entry["position"])
        score = "-" if entry["score"] is None else f"{entry['score']:.3f}"
        lines.append(
            f"{position:>4}  {entry['decision']:<8}  {entry['reason'] or '':<24}  "
            f"{entry['tokens']:>7}  {score:>6}  {entry['form']:<9}  {entry['layer']:<9}  "
            f"{entry['source'][:16]:<16}  {entry['id']}"
        )
    # Plans stored before breaks were named have none.
    if brk := response["cache"].get("break"):
        seq = "" if brk["seq"] is None else f", fact seq {brk['seq']}"
        lines.append(
            f"prefix break  {brk['cause']}  at pos {brk['position']} "
            f"({brk['item_id'] or 'the end'}{seq}): {brk['detail']}"
        )
    # Plans stored before breakpoints were placed have none.
    for mark in response.get("cache_breakpoints", []):
        where = "system" if mark["message"] is None else f"messages[{mark['message']}]"
        lines.append(
            f"cache breakpoint  {mark['reason']:<13}  after pos {mark['position']} "
            f"({mark['item_id']}) on {where} block {mark['block']}"
        )
    return "\n".join(lines)


def run_plan(*, assembly_id: str, url: str, api_key: str | None) -> int:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(f"{url.rstrip('/')}/assemblies/{assembly_id}", headers=headers)
    if response.status_code != 200:
        print(response.json()["error"]["message"], file=sys.stderr)
        return 1
    print(render_plan(response.json()))
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
    list_keys = commands.add_parser("list-keys", help="list API keys by id and fingerprint")
    list_keys.add_argument("--tenant")
    revoke_key = commands.add_parser("revoke-key", help="revoke an API key by its id")
    revoke_key.add_argument("key_id", type=int)
    plan = commands.add_parser("plan", help="render a stored assembly plan as a table")
    plan.add_argument("assembly_id")
    plan.add_argument("--url", default=f"http://{settings.host}:{settings.port}")
    plan.add_argument("--api-key", default=os.environ.get("CTX_API_KEY"))
    evaluate = commands.add_parser(
        "evaluate",
        help="replay JSONL trajectories under variants of the settings: what each would cost"
        " and show",
    )
    evaluate.add_argument("files", nargs="+", type=Path, help="JSONL files, one item per line")
    evaluate.add_argument("--format", choices=get_args(Format), default="responses")
    evaluate.add_argument(
        "--variant",
        action="append",
        default=[],
        help='a variant as JSON, e.g. \'{"name": "never", "follow_advice": false}\' (repeat)',
    )
    evaluate.add_argument("--context-window", type=int, help="each session's window")
    evaluate.add_argument("--json", type=Path, help="write every file's answer and the totals")
    evaluate.add_argument("--chart", type=Path, help="write a bar chart (.svg or .png)")
    args = parser.parse_args(argv)
    match args.command:
        case "migrate":
            return run_migrate(settings)
        case "serve":
            return run_serve(settings, host=args.host, port=args.port, workers=args.workers)
        case "create-key":
            return run_create_key(settings, tenant=args.tenant)
        case "list-keys":
            return run_list_keys(settings, tenant=args.tenant)
        case "revoke-key":
            return run_revoke_key(settings, key_id=args.key_id)
        case "plan":
            return run_plan(assembly_id=args.assembly_id, url=args.url, api_key=args.api_key)
        case "evaluate":
            return run_evaluate(
                args.files,
                fmt=args.format,
                variants=args.variant,
                context_window=args.context_window,
                json_path=args.json,
                chart_path=args.chart,
                settings=settings,
            )
        case _:
            parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
