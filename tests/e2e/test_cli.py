"""The `contextd` console script, run as a real process."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.contract.evaluation import EvaluateResponse
from app.main import create_app
from app.settings import Settings
from bench.common import free_port

ROOT = Path(__file__).resolve().parents[2]


def _contextd(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CTX_DATABASE_URL": database_url, "CTX_API_KEYS": "[]"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_migrate_then_create_key_prints_a_working_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert _contextd("migrate", database_url=url).returncode == 0
    created = _contextd("create-key", "--tenant", "acme", database_url=url)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    with TestClient(create_app(Settings(database_url=url))) as service:
        assert service.post("/sessions", json={"session_id": "s"}).status_code == 401
        authorized = {"Authorization": f"Bearer {key}"}
        assert (
            service.post("/sessions", json={"session_id": "s"}, headers=authorized).status_code
            == 201
        )


def test_serve_refuses_open_mode_on_a_public_address(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'open.db'}"
    assert _contextd("migrate", database_url=url).returncode == 0
    refused = _contextd("serve", "--host", "0.0.0.0", "--port", "8999", database_url=url)
    assert refused.returncode == 2
    assert "refusing to serve open" in refused.stderr


def test_keys_are_stored_only_as_their_sha256(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    assert _contextd("migrate", database_url=url).returncode == 0
    key = (
        _contextd("create-key", "--tenant", "acme", database_url=url)
        .stdout.strip()
        .splitlines()[-1]
    )
    with sqlite3.connect(tmp_path / "keys.db") as db:
        rows = db.execute("SELECT * FROM api_keys").fetchall()
        dump = "\n".join(db.iterdump())
    assert [row[2] for row in rows] == [hashlib.sha256(key.encode()).hexdigest()]
    assert key not in dump


def test_a_revoked_key_is_refused_and_the_service_stays_closed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'revoke.db'}"
    assert _contextd("migrate", database_url=url).returncode == 0
    created = _contextd("create-key", "--tenant", "acme", database_url=url).stdout.splitlines()
    key = created[-1]
    key_id = created[0].split("API key ")[1].split(" ")[0]
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:12]
    listed = _contextd("list-keys", database_url=url).stdout.splitlines()
    assert listed[1].split() == [key_id, fingerprint, listed[1].split()[2], "-", "acme"]
    authorized = {"Authorization": f"Bearer {key}"}
    # A process that trusts a resolved key for an hour keeps serving it; one that re-checks
    # every time refuses it as soon as it is revoked.
    trusting = create_app(Settings(database_url=url, api_key_cache_seconds=3600))
    checking = create_app(Settings(database_url=url, api_key_cache_seconds=0))
    with TestClient(trusting) as cached, TestClient(checking) as fresh:
        assert cached.get("/sessions/none", headers=authorized).status_code == 404
        assert fresh.get("/sessions/none", headers=authorized).status_code == 404
        revoked = _contextd("revoke-key", key_id, database_url=url)
        assert revoked.returncode == 0, revoked.stderr
        assert f"revoked API key {key_id} (fingerprint {fingerprint}) of tenant 'acme'" in (
            revoked.stdout
        )
        assert cached.get("/sessions/none", headers=authorized).status_code == 404
        assert fresh.get("/sessions/none", headers=authorized).status_code == 401
        # With its only key revoked the service does not turn open.
        assert fresh.get("/sessions/none").status_code == 401
    assert _contextd("list-keys", database_url=url).stdout.splitlines()[1].split()[3] != "-"
    assert _contextd("revoke-key", "999", database_url=url).returncode == 1


@pytest.mark.parametrize("how", ["make variable", "environment"])
def test_make_run_serves_on_the_port_it_is_given(tmp_path: Path, how: str) -> None:
    """Issue 46: `make run` served on 8000 whatever `CTX_PORT` said."""
    port = free_port()
    env = {**os.environ, "CTX_DATABASE_URL": f"sqlite:///{tmp_path / 'run.db'}"}
    env.pop("PORT", None)
    if how == "environment":
        env["CTX_PORT"] = str(port)
    command = ["make", "--no-print-directory", "run"]
    if how == "make variable":
        command.append(f"PORT={port}")
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # make, migrate and the server: one group to stop
    )
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    break
            assert process.poll() is None, "make run ended"
            time.sleep(0.05)
        else:
            raise AssertionError("nothing served on the given port")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


CHAT_RUN = [
    {"role": "user", "content": "Why does test_parse fail in parser.py?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"cmd": "pytest tests/test_parse.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "E KeyError: 'date' in parse_row\n" * 40},
    {"role": "assistant", "content": "parse_row reads row['date']; the fixture says 'day'."},
]


def test_evaluate_on_files_prints_the_table_and_writes_the_json_and_the_chart(
    tmp_path: Path,
) -> None:
    runs = [ROOT / "tests/data/trajectories/swea_ctf_crypto_katy.jsonl"]
    chat = tmp_path / "chat-run.jsonl"
    chat.write_text("".join(json.dumps(message) + "\n" for message in CHAT_RUN))
    variants = [
        '{"name": "never", "follow_advice": false}',
        '{"name": "truncate", "strategy": "truncate"}',
    ]
    options = [arg for variant in variants for arg in ("--variant", variant)]
    outputs = ("--json", str(tmp_path / "report.json"), "--chart", str(tmp_path / "chart.svg"))
    url = f"sqlite:///{tmp_path / 'unused.db'}"  # evaluate keeps nothing: no database is made

    responses = _contextd(
        "evaluate",
        *map(str, runs),
        "--context-window",
        "8000",
        *options,
        *outputs,
        database_url=url,
    )
    chats = _contextd("evaluate", str(chat), "--format", "chat", *options, database_url=url)
    again = _contextd(
        "evaluate", *map(str, runs), "--context-window", "8000", *options, database_url=url
    )
    bad = _contextd("evaluate", str(chat), "--variant", '{"name": "current"}', database_url=url)

    assert responses.returncode == 0, responses.stderr
    table = responses.stdout.splitlines()
    assert table[0].split()[:3] == ["variant", "calls", "reuse"]
    assert [line.split()[0] for line in table[1:]] == ["current", "never", "truncate"]
    assert "replaying" in responses.stderr
    assert "100%" in responses.stderr
    assert again.stdout == responses.stdout  # deterministic
    report = json.loads((tmp_path / "report.json").read_text())
    assert [entry["file"] for entry in report["files"]] == [str(runs[0])]
    evaluation = report["files"][0]["evaluation"]
    EvaluateResponse.model_validate(evaluation)
    assert [total["calls"] for total in report["totals"]] == [
        variant["calls"] for variant in evaluation["variants"]
    ]
    chart = (tmp_path / "chart.svg").read_text()
    assert chart.startswith("<?xml")
    assert "<svg" in chart
    assert chats.returncode == 0, chats.stderr
    assert [line.split()[1] for line in chats.stdout.splitlines()[1:]] == ["2", "2", "2"]
    assert bad.returncode == 2
    assert "current" in bad.stderr
    assert not (tmp_path / "unused.db").exists()
