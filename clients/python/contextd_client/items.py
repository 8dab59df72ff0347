"""Provider JSON, as the service takes and gives it: plain dicts, never wrapped.

An item is one entry of a history in the request's `format` (an OpenAI Responses input item,
a Chat Completions message or an Anthropic message); what the service returns is ready to send
to that provider's SDK as it is, so the client does not model its shape.
"""

from __future__ import annotations

from typing import Any

Item = dict[str, Any]
"""One history entry: a Responses item, a Chat message or an Anthropic message."""

Message = dict[str, Any]
"""One entry of an assembly's provider-ready `messages`, in its `output_format`."""

SystemBlock = dict[str, Any]
"""One Anthropic text block of the top-level `system` of `anthropic` output."""
