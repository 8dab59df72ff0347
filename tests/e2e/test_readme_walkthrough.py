"""The README's whole-turn curl walkthrough, run as written against a real server process: a
walkthrough that no longer works fails here, not in a new user's terminal."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.servers import running

README = Path(__file__).resolve().parents[2] / "README.md"


def _walkthrough() -> str:
    text = README.read_text()
    section = text.split("## One whole turn with curl", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match is not None, "the walkthrough's sh block is missing"
    return match.group(1)


@pytest.mark.skipif(
    shutil.which("jq") is None or shutil.which("curl") is None,
    reason="the walkthrough uses curl and jq",
)
def test_the_curl_walkthrough_runs_as_written(postgres_url: str) -> None:
    script = _walkthrough()
    assert script.startswith("C=localhost:8000;")
    with running(postgres_url) as server:
        base = server.base.removeprefix("http://")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("localhost:8000", base, 1)],
            cwd=README.parent,
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '{"session_id":"walk","usable_window":112000}'
    assert '{"id":"README.md","decision":"dropped","reason":"below_relevance","tokens":4}' in lines
    assert any('"applied":true,"tokens_before":3349,"tokens_after":79' in line for line in lines)
    assert any(
        line.startswith('{"position":3,"item_id":"history:2","seq":null,"cause":"compaction"')
        for line in lines
    )
    assert lines[-1].endswith('{"seq":7,"type":"contextd.compaction"}]')
