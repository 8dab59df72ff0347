"""Outbound calls: session lifecycle hooks and the optional LLM summarizer.

Both are bounded by timeouts; a slow or dead endpoint can delay a compaction by at most its
timeout, never stall it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import httpx

from app.settings import Settings

FailurePolicy = Literal["fail_open", "fail_closed"]
"""What a hook's timeout or error means for the compaction it guards."""
HookOutcome = Literal["accepted", "vetoed", "failed_open", "failed_closed", "not_configured"]


@dataclass(frozen=True)
class HookResult:
    event: str
    outcome: HookOutcome
    notes: tuple[str, ...] = ()
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event, "outcome": self.outcome, "detail": self.detail}


def call_hook(
    url: str | None,
    *,
    event: str,
    payload: dict[str, Any],
    fail_closed: bool,
    timeout: float,
) -> HookResult:
    """POST `payload` to a hook. A 2xx answer may veto (`{"veto": true}`) or pin notes
    (`{"notes": [...]}`); a 409 answer is a veto too. Errors and timeouts follow the policy."""
    if not url:
        return HookResult(event, "not_configured")
    try:
        response = httpx.post(url, json={"event": event, **payload}, timeout=timeout)
    except httpx.HTTPError as exc:
        outcome: HookOutcome = "failed_closed" if fail_closed else "failed_open"
        return HookResult(event, outcome, detail=f"{type(exc).__name__}")
    if response.status_code == 409:
        return HookResult(event, "vetoed", detail="hook answered 409")
    if not response.is_success:
        outcome = "failed_closed" if fail_closed else "failed_open"
        return HookResult(event, outcome, detail=f"hook answered {response.status_code}")
    try:
        answer = response.json() if response.content else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict):
        answer = {}
    if answer.get("veto") is True:
        return HookResult(event, "vetoed", detail=str(answer.get("reason") or "vetoed by hook"))
    notes = answer.get("notes")
    pinned = tuple(str(note) for note in notes) if isinstance(notes, list) else ()
    return HookResult(event, "accepted", notes=pinned)


class SummarizerUnavailable(Exception):
    """The LLM summarizer is not configured or did not answer usably."""


def summarize_with_llm(prompt: str, *, settings: Settings) -> str:
    """Ask an OpenAI-compatible chat completions endpoint for the narrative summary."""
    if not settings.summarizer_url:
        raise SummarizerUnavailable("no summarizer endpoint is configured (CTX_SUMMARIZER_URL)")
    headers = (
        {"Authorization": f"Bearer {settings.summarizer_api_key}"}
        if settings.summarizer_api_key
        else {}
    )
    try:
        response = httpx.post(
            f"{settings.summarizer_url.rstrip('/')}/chat/completions",
            json={
                "model": settings.summarizer_model,
                "temperature": 0,
                "messages": [{"role": "user", "content": prompt}],
            },
            headers=headers,
            timeout=settings.summarizer_timeout_seconds,
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["message"]["content"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise SummarizerUnavailable(f"summarizer failed: {type(exc).__name__}") from exc
    if not isinstance(text, str) or not text.strip():
        raise SummarizerUnavailable("summarizer returned no text")
    return text
