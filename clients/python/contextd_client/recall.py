"""The recall tool as the framework adapters offer it: its definition, and how a model's call of
it becomes a request and its answer the tool's output.

A context names what it shows shortened or not at all by fact seq ("the full output is fact
seq 7"), and every session-mode assembly offers this tool in its `tools` to read it back
(`POST /sessions/{id}/recall`). An adapter offers the same tool in its framework's own form,
so the name, description and parameters here are the service's, unchanged (a test holds them
against a real assembly's `tools`). They never change within a release: tool definitions come
first in a provider's prompt, and a changing one would empty the provider's cache.

Invariants:

- **Whatever the model sends, the output is text.** It is the service's `tool_output`; or,
  when the service refuses the arguments (any 4xx), its error message with the details the
  message does not already say; or, when the arguments are no JSON object, a sentence saying
  so. A model's mistake is an answer it can correct, never an exception in the framework's
  loop. (A service that cannot answer at all, 5xx or unreachable, raises, as every other call
  of the adapters does.)
- **Nothing is checked here that the service checks.** The arguments go as the model gave
  them; the service is the one judge of a recall.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from contextd_client import params as p
from contextd_client.errors import ContextdError, explained

__all__ = [
    "RECALL_TOOL_DESCRIPTION",
    "RECALL_TOOL_NAME",
    "InvalidArguments",
    "is_refusal",
    "recall_request",
    "recall_tool_parameters",
    "refusal_output",
]

RECALL_TOOL_NAME = "context_recall"
RECALL_TOOL_DESCRIPTION = (
    "Reads back a fact this context names as 'fact seq N': `seq` gives its text, in windows of"
    " lines; `pattern` (RE2) with `seq` or `from_seq`/`to_seq` lists the matching lines."
)
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seq": {"type": "integer"},
        "from_line": {"type": "integer"},
        "from_char": {"type": "integer"},
        "pattern": {"type": "string"},
        "from_seq": {"type": "integer"},
        "to_seq": {"type": "integer"},
    },
    "additionalProperties": False,
}


def recall_tool_parameters() -> dict[str, Any]:
    """The JSON schema of the tool's arguments: a new copy on every call, sharing no part with
    another (frameworks may change the schema they are given, one property at a time)."""
    parameters: dict[str, Any] = json.loads(json.dumps(_PARAMETERS))
    return parameters


class InvalidArguments(Exception):
    """The model's arguments are no JSON object; the message says so, for the model."""


def recall_request(arguments: str | Mapping[str, Any]) -> p.RecallRequest:
    """The body of `POST /sessions/{id}/recall` for the model's arguments: a JSON object as
    text (an empty text is no arguments) or already parsed. Raises `InvalidArguments`."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidArguments(f"the arguments are not valid JSON: {exc}") from None
    else:
        parsed = arguments
    if not isinstance(parsed, Mapping):
        raise InvalidArguments(f"the arguments must be a JSON object, not {arguments!r}")
    return cast(p.RecallRequest, dict(parsed))


def is_refusal(error: ContextdError) -> bool:
    """The service refused the request (4xx): an answer for the model, not a failure."""
    return error.status is not None and 400 <= error.status < 500


def refusal_output(error: ContextdError) -> str:
    """A refused recall as the tool's output: the service's message, then each detail it does
    not already say, so that the model can correct its call (`errors.explained`)."""
    return explained(error.message, error.details)
