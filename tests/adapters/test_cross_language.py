"""One scripted run through both languages' adapters of the OpenAI Agents family leaves logs of
the same shape: `examples/agents_sdk_loop.py` (the Python Agents SDK and `ContextdSession`) and
`clients/typescript/examples/agents_loop.ts` (OpenAI Agents JS and the TypeScript
`ContextdSession`) play the same engineer, turn for turn, against one server process.

The shape of a log is each fact's type in order, with the item's own `type`, a message's role, a
call's tool name and a compaction's strategy: what the adapters wrote and when the service
compacted, without the ids, token counts and field order each SDK writes its items with. The
TypeScript side needs the package's dependencies (`npm ci` in clients/typescript, which
`make test` runs first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextd_client import ContextdClient
from tests.e2e.servers import Server, running

ROOT = Path(__file__).resolve().parents[2]
TYPESCRIPT = ROOT / "clients" / "typescript"
API_KEY = "ctx-cross-language-key"

Shape = list[tuple[str, str | None, str | None]]


@pytest.fixture(scope="module")
def server(postgres_url: str) -> Iterator[Server]:
    with running(postgres_url, CTX_API_KEYS=f'["cross-language:{API_KEY}"]') as service:
        yield service


def run_example(command: list[str], *, cwd: Path, server: Server) -> str:
    """Runs an example against `server` and returns the session id it printed first."""
    env = {**os.environ, "CONTEXTD_URL": server.base, "CONTEXTD_API_KEY": API_KEY}
    finished = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert finished.returncode == 0, finished.stderr
    first, *rest = finished.stdout.splitlines()
    assert any(line.startswith("recalled: ") for line in rest), finished.stdout
    label, session_id = first.split()
    assert label == "session"
    return session_id


def shape_of(server: Server, session_id: str) -> Shape:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        shape: Shape = []
        for logged in client.iter_items(session_id):
            item = logged.item
            detail = item.get("role") or item.get("name") or item.get("strategy")
            shape.append(
                (logged.type, item.get("type"), detail if isinstance(detail, str) else None)
            )
        return shape


def test_the_python_and_typescript_agents_adapters_log_one_run_alike(server: Server) -> None:
    python = run_example(
        [sys.executable, str(ROOT / "examples" / "agents_sdk_loop.py")], cwd=ROOT, server=server
    )
    typescript = run_example(
        [str(TYPESCRIPT / "node_modules" / ".bin" / "tsx"), "examples/agents_loop.ts"],
        cwd=TYPESCRIPT,
        server=server,
    )

    python_shape = shape_of(server, python)
    assert shape_of(server, typescript) == python_shape
    assert ("contextd.compaction", "contextd.compaction", "clear_tool_results") in python_shape
    assert ("function_call", "function_call", "context_recall") in python_shape
    assert ("message", "message", "user") in python_shape
