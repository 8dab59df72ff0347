"""Metrics stay correct under several uvicorn workers: any worker answers for all of them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.builders import user_msg
from tests.e2e.servers import running


@pytest.fixture
def two_workers(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with running(postgres_url, workers=2) as server:
        yield server.base


def _appended(text: str, phase: str) -> float:
    for line in text.splitlines():
        if line.startswith("contextd_appended_tokens_total{") and f'phase="{phase}"' in line:
            return float(line.split()[-1])
    return 0.0


def test_every_scrape_counts_the_work_of_all_workers(two_workers: str, session_id: str) -> None:
    phase = f"mp-{os.getpid()}"
    with httpx.Client(base_url=two_workers, timeout=10) as client:
        client.post("/sessions", json={"session_id": session_id}).raise_for_status()
        tokens = 0
        for n in range(30):
            # New connections spread requests over both workers.
            response = httpx.post(
                f"{two_workers}/sessions/{session_id}/items",
                json={"items": [user_msg(f"message number {n}")], "phase": phase},
                timeout=10,
            )
            response.raise_for_status()
            tokens += response.json()["items"][0]["tokens"]
        scrapes = [httpx.get(f"{two_workers}/metrics", timeout=10).text for _ in range(6)]
    assert [_appended(text, phase) for text in scrapes] == [float(tokens)] * 6
