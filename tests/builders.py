"""Small builders for Responses items used across tests."""

from __future__ import annotations

from typing import Any

from app.domain.facts import FactRecord


def user_msg(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_msg(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def system_msg(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "system", "content": [{"type": "input_text", "text": text}]}


def tool_call(call_id: str, name: str = "shell", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def tool_output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def long_text(tokens: int) -> str:
    """Prose of at least `tokens` tokens in o200k_base and cl100k_base (a word each)."""
    return " note" * tokens


Fact = FactRecord
"""A logged fact as the fold reads it."""
