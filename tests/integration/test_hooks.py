"""Hook calls against real HTTP endpoints on loopback: what a slow, oversized or failing endpoint
can and cannot do to a call, and which destinations a call may reach."""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

from app.hooks import NOT_CALLED, FailureReason, HookCaller, HookResult
from app.settings import Settings

Answer = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Served:
    """What a loopback endpoint saw: the bodies it was sent, and for each answer whether it was
    written whole or the client hung up first."""

    received: list[dict[str, Any]] = field(default_factory=list)
    hosts: list[str | None] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)


@contextmanager
def serving(answer: Answer) -> Iterator[tuple[str, Served]]:
    """A loopback endpoint answering every POST with `answer`; on exit every handler thread has
    finished, so `Served` is complete."""
    served = Served()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            served.received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            served.hosts.append(self.headers["host"])
            try:
                answer(self)
            except (BrokenPipeError, ConnectionResetError):
                served.answers.append("client hung up")
            else:
                served.answers.append("written")

        def log_message(self, *_args: object) -> None:
            return

    class Server(ThreadingHTTPServer):
        daemon_threads = False  # joined by server_close

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def json_answer(status: int, body: bytes = b"{}") -> Answer:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def drip(handler: BaseHTTPRequestHandler) -> None:
    """A valid answer pinning a note, one byte every tenth of a second (about 12 s in all):
    no single read ever waits long."""
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.end_headers()
    for byte in b'{"notes": ["dripped"]' + b" " * 100 + b"}":
        handler.wfile.write(bytes([byte]))
        time.sleep(0.1)


def oversized(handler: BaseHTTPRequestHandler) -> None:
    """64 MiB of JSON whitespace (more than loopback buffers hold), written as it is read."""
    chunk = b" " * 65536
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(1024 * len(chunk)))
    handler.end_headers()
    for _ in range(1024):
        handler.wfile.write(chunk)


def call(
    caller: HookCaller, url: str, *, tenant_id: int = 1, fail_closed: bool = False
) -> HookResult:
    hook = partial(
        caller.call,
        url,
        tenant_id=tenant_id,
        event="pre_compact",
        payload={"session_id": "s"},
        fail_closed=fail_closed,
    )
    return anyio.run(hook)


LOOPBACK = ["127.0.0.0/8"]


def hook_caller(*, allowed: list[str] = LOOPBACK, **settings: Any) -> HookCaller:
    """A hook caller allowed to reach the loopback network (where the tests' endpoints listen),
    unless `allowed` says otherwise."""
    return HookCaller(Settings(hook_allowed_networks=allowed, **settings))


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def test_an_answer_accepted_vetoed_or_pinning_notes() -> None:
    caller = hook_caller()
    answers = [
        json_answer(200, b'{"notes": ["Deploy freeze until Friday"]}'),
        json_answer(200, b'{"veto": true, "reason": "mid-transaction"}'),
        json_answer(409, b""),
        json_answer(204, b""),
        json_answer(200, b"[1, 2]"),
    ]
    results = []
    for answer in answers:
        with serving(answer) as (url, served):
            results.append(call(caller, url))
        assert served.received == [{"event": "pre_compact", "session_id": "s"}]
    assert results == [
        HookResult("pre_compact", "accepted", notes=("Deploy freeze until Friday",)),
        HookResult("pre_compact", "vetoed", detail="mid-transaction"),
        HookResult("pre_compact", "vetoed", detail="hook answered 409"),
        HookResult("pre_compact", "accepted"),
        HookResult(
            "pre_compact",
            "failed_open",
            detail="the hook's answer is not a JSON object; an empty answer or one such as"
            ' {"veto": false} is',
            reason="answer_not_json",
        ),
    ]


def test_a_dripping_endpoint_is_abandoned_at_the_deadline(caplog: pytest.LogCaptureFixture) -> None:
    """Each byte comes well within the timeout; the whole answer does not come within it."""
    caller = hook_caller(hook_timeout_seconds=0.5)
    with caplog.at_level(logging.WARNING, "contextd"), serving(drip) as (url, served):
        results = [call(caller, url), call(caller, url, fail_closed=True)]
    late = "no whole answer within the 0.5 s deadline"
    assert results == [
        HookResult("pre_compact", "failed_open", detail=late, reason="deadline"),
        HookResult("pre_compact", "failed_closed", detail=late, reason="deadline"),
    ]
    assert served.answers == ["client hung up", "client hung up"]
    assert [r.getMessage() for r in caplog.records] == [
        "pre_compact hook of tenant 1 failed: no whole answer within the 0.5 s deadline"
    ] * 2


def test_an_oversized_answer_is_cut_at_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    caller = hook_caller(hook_max_answer_bytes=64 * 1024)
    with caplog.at_level(logging.WARNING, "contextd"), serving(oversized) as (url, served):
        result = call(caller, url)
    too_large = "the answer exceeded 65536 bytes, the limit"
    assert result == HookResult(
        "pre_compact", "failed_open", detail=too_large, reason="answer_too_large"
    )
    assert served.answers == ["client hung up"]
    assert [r.getMessage() for r in caplog.records] == [
        f"pre_compact hook of tenant 1 failed: {too_large}"
    ]


def test_an_answer_at_the_cap_is_read() -> None:
    body = b'{"notes": ["at the cap"]}'
    with serving(json_answer(200, body)) as (url, _):
        result = call(hook_caller(hook_max_answer_bytes=len(body)), url)
    assert result == HookResult("pre_compact", "accepted", notes=("at the cap",))


def test_every_failure_says_why(caplog: pytest.LogCaptureFixture) -> None:
    """A refused destination, a refused connection, an HTTP error, a redirect and a timeout each
    say what failed; a refused destination names the kind of address, the loopback one by its
    address, and the setting that allows it (the log names every address)."""
    caller = hook_caller(hook_timeout_seconds=0.5)
    results = {}
    with caplog.at_level(logging.WARNING, "contextd"):
        results["refused destination"] = call(hook_caller(allowed=[]), closed_port_url())
        results["refused"] = call(caller, closed_port_url())
        for status in (500, 302, 404):
            with serving(json_answer(status)) as (url, _):
                results[str(status)] = call(caller, url)
        with serving(drip) as (url, _):
            results["timeout"] = call(caller, url)

    def failed(reason: FailureReason, detail: str) -> HookResult:
        return HookResult("pre_compact", "failed_open", detail=detail, reason=reason)

    assert results == {
        "refused destination": failed(
            "refused_destination",
            "refused destination: 127.0.0.1 resolves to 127.0.0.1, a loopback address; hooks"
            " reach public addresses and the networks in CTX_HOOK_ALLOWED_NETWORKS only"
            ' (["127.0.0.1/32"] allows it)',
        ),
        "refused": failed("connection_failed", "the call did not go through (ConnectError)"),
        "500": failed("status", "the hook answered HTTP 500"),
        "302": failed("status", "the hook answered HTTP 302"),
        "404": failed("status", "the hook answered HTTP 404"),
        "timeout": failed("deadline", "no whole answer within the 0.5 s deadline"),
    }
    causes = [
        r.getMessage().removeprefix("pre_compact hook of tenant 1 failed: ") for r in caplog.records
    ]
    assert causes[0] == "refused destination: 127.0.0.1 is 127.0.0.1"
    assert causes[1].startswith("ConnectError: ")


def test_a_tenant_beyond_its_limit_of_calls_in_flight_is_not_called() -> None:
    """With one call of tenant 1 held by its endpoint, tenant 1's next is not made (and follows
    its policy) while tenant 2's is; once the first returns, tenant 1 is called again."""
    caller = hook_caller(hook_max_concurrent_per_tenant=1, hook_timeout_seconds=60)
    arrived, release = threading.Event(), threading.Event()

    def hold(handler: BaseHTTPRequestHandler) -> None:
        arrived.set()
        release.wait()
        json_answer(200)(handler)

    first: list[HookResult] = []
    with serving(hold) as (held, holding), serving(json_answer(200)) as (quick, served):
        in_flight = threading.Thread(target=lambda: first.append(call(caller, held)))
        in_flight.start()
        assert arrived.wait(timeout=60)
        meanwhile = [
            call(caller, quick),
            call(caller, quick, fail_closed=True),
            call(caller, quick, tenant_id=2),
        ]
        release.set()
        in_flight.join()
        after = call(caller, quick)
    assert meanwhile == [
        HookResult("pre_compact", "failed_open", detail=NOT_CALLED, reason="not_called"),
        HookResult("pre_compact", "failed_closed", detail=NOT_CALLED, reason="not_called"),
        HookResult("pre_compact", "accepted"),
    ]
    accepted = HookResult("pre_compact", "accepted")
    assert (first, after) == ([accepted], accepted)
    assert (len(holding.received), len(served.received)) == (1, 2)


@contextmanager
def listening() -> Iterator[tuple[int, Callable[[], bool]]]:
    """A bare listener on loopback: its port, and whether anyone has connected to it (a
    connection completes in the kernel's queue, accepted or not)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1], lambda: bool(select.select([listener], [], [], 0)[0])


def test_refused_destinations_are_never_contacted(caplog: pytest.LogCaptureFixture) -> None:
    """Loopback is not a public address: however the host spells it, the address it resolves to
    is refused before any connection is made."""
    caller = hook_caller(allowed=[])
    hosts = ["127.0.0.1", "2130706433", "0x7f000001", "017700000001", "127.1", "localhost"]
    with caplog.at_level(logging.WARNING, "contextd"), listening() as (port, contacted):
        results = {call(caller, f"http://{host}:{port}/hook") for host in hosts}
        assert not contacted()
    assert {(result.outcome, result.reason) for result in results} == {
        ("failed_open", "refused_destination")
    }
    refused = "pre_compact hook of tenant 1 failed: refused destination: "
    assert [r.getMessage() for r in caplog.records[:-1]] == [
        f"{refused}{host} is 127.0.0.1" for host in hosts[:-1]
    ]
    assert caplog.records[-1].getMessage() in {  # localhost may be ::1 as well
        f"{refused}localhost is 127.0.0.1",
        f"{refused}localhost is 127.0.0.1, ::1",
    }


def test_an_allowed_network_is_reached_at_the_address_resolved() -> None:
    """With loopback allowed, a numeric spelling reaches it too: the connection goes to the
    address the host resolved to, and the Host header is still the URL's."""
    with serving(json_answer(200)) as (url, served):
        port = url.split(":")[2].split("/")[0]
        result = call(hook_caller(), f"http://2130706433:{port}/hook")
    assert result == HookResult("pre_compact", "accepted")
    assert served.hosts == [f"2130706433:{port}"]
