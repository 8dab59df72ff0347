"""An answer that finishes work after it is sent always ends its response, whatever the work
does: the server would otherwise cut the connection after the answer."""

from __future__ import annotations

import anyio
from prometheus_client import REGISTRY
from starlette.types import Message

from app.api.responses import AnswerThenFinish


def _finish_failures() -> float:
    labels = {"step": "finish"}
    return REGISTRY.get_sample_value("contextd_after_answer_failures_total", labels) or 0.0


def test_an_answer_whose_finishing_work_fails_still_ends_and_the_failure_is_counted() -> None:
    def finish() -> None:
        raise RuntimeError("the work after the answer failed")

    response = AnswerThenFinish(b'{"id": "a"}', finish=finish, status_code=201)
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    before = _finish_failures()
    anyio.run(response, {"type": "http", "method": "POST", "path": "/assemble"}, receive, send)
    assert sent == [
        {
            "type": "http.response.start",
            "status": 201,
            "headers": [(b"content-length", b"11"), (b"content-type", b"application/json")],
        },
        {"type": "http.response.body", "body": b'{"id": "a"}', "more_body": True},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
    assert _finish_failures() == before + 1
