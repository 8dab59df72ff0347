"""Python client of contextd: typed, sync and async, with retries that never apply a call twice.

    from contextd_client import ContextdClient

    with ContextdClient("http://127.0.0.1:8000", api_key="...") as ctx:
        ctx.create_session(session_id="demo")
        ctx.append_items("demo", items=[{"type": "message", "role": "user", "content": "hi"}])
        context = ctx.assemble(session_id="demo", output_format="chat")

`models` holds the response (and request) models, `params` the keyword arguments of each
method, `items` the names of provider JSON, `recall` the recall tool as the framework adapters
offer it.
"""

from contextd_client import models, params
from contextd_client.client import AsyncContextdClient, ContextdClient
from contextd_client.errors import (
    BadRequest,
    Conflict,
    ContextdError,
    EvaluationEnded,
    NotFound,
    PayloadTooLarge,
    SequenceConflict,
    ServerError,
    Unauthorized,
    Unavailable,
    Unreachable,
    ValidationFailed,
)
from contextd_client.items import Item, Message, SystemBlock
from contextd_client.policy import Retries, Timeouts

__all__ = [
    "AsyncContextdClient",
    "BadRequest",
    "Conflict",
    "ContextdClient",
    "ContextdError",
    "EvaluationEnded",
    "Item",
    "Message",
    "NotFound",
    "PayloadTooLarge",
    "Retries",
    "SequenceConflict",
    "ServerError",
    "SystemBlock",
    "Timeouts",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "ValidationFailed",
    "models",
    "params",
]
