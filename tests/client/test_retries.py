"""Retries that never apply a call twice, through real sockets: an append whose answer is lost
after the server committed it is sent again with the same idempotency key and lands once; a
503 is waited out as its `Retry-After` says, within the attempts and the total time."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from contextd_client import ContextdClient, Retries, Timeouts, Unavailable, Unreachable, models
from tests.builders import tool_call, tool_output, user_msg
from tests.client.conftest import QUICK, open_client
from tests.client.relays import AnswerDroppingProxy, UnavailableFront
from tests.e2e.servers import Server


@contextlib.contextmanager
def socket_without_listener() -> Iterator[str]:
    """The address of a port bound on loopback, that no one listens on: connections are
    refused, and no other process can take the port meanwhile."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{bound.getsockname()[1]}"


@pytest.fixture
def direct(server: Server) -> Iterator[ContextdClient]:
    """A client straight to the server, to set up and to read what was written."""
    yield from open_client(server.base, kind="sync")


@pytest.fixture
def proxy(server: Server) -> Iterator[AnswerDroppingProxy]:
    with AnswerDroppingProxy(server.port) as relay:
        yield relay


@pytest.mark.parametrize("given_key", [None, "turn-7"])
def test_an_append_whose_answer_was_lost_is_retried_with_its_key_and_lands_once(
    kind: str,
    direct: ContextdClient,
    proxy: AnswerDroppingProxy,
    session_id: str,
    given_key: str | None,
    postgres_timeline: int,
) -> None:
    direct.create_session(session_id=session_id)
    direct.append_items(session_id, items=[user_msg("before")])
    batch = [user_msg("run the tests"), tool_call("c1"), tool_output("c1", "3 passed")]

    for client in open_client(proxy.base, kind=kind, retries=QUICK):
        proxy.drop_answers(1)
        appended = client.append_items(session_id, items=batch, idempotency_key=given_key)

    log = list(direct.iter_items(session_id))
    assert [entry.item for entry in log] == [user_msg("before"), *batch]
    assert appended == models.AppendResponse(
        first_seq=2,
        last_seq=4,
        items=[models.AppendedItem(seq=e.seq, type=e.type, tokens=e.tokens) for e in log[1:]],
        excluded=[],
        timeline=postgres_timeline,
    )
    # The first answer (the batch written) was lost; the retry was answered as a repeat.
    assert proxy.answers == [("HTTP/1.1 201 Created", True), ("HTTP/1.1 200 OK", False)]
    first, again = proxy.idempotency_keys()
    assert first == again == (given_key or first)


def test_a_read_whose_answer_was_lost_is_retried(
    kind: str, direct: ContextdClient, proxy: AnswerDroppingProxy, session_id: str
) -> None:
    direct.create_session(session_id=session_id)
    for client in open_client(proxy.base, kind=kind, retries=QUICK):
        proxy.drop_answers(1)
        assert client.get_session(session_id) == direct.get_session(session_id)
    assert [dropped for _, dropped in proxy.answers] == [True, False]


def test_a_recall_whose_answer_was_lost_is_retried(
    kind: str, direct: ContextdClient, proxy: AnswerDroppingProxy, session_id: str
) -> None:
    # A recall writes nothing, so it is asked again like a read.
    direct.create_session(session_id=session_id)
    direct.append_items(session_id, items=[user_msg("hello")])
    for client in open_client(proxy.base, kind=kind, retries=QUICK):
        proxy.drop_answers(1)
        assert client.recall(session_id, seq=1) == direct.recall(session_id, seq=1)
    assert [dropped for _, dropped in proxy.answers] == [True, False]


def test_another_post_whose_answer_was_lost_is_not_sent_again(
    kind: str, direct: ContextdClient, proxy: AnswerDroppingProxy, session_id: str
) -> None:
    direct.create_session(session_id=session_id)
    direct.append_items(session_id, items=[user_msg("hello")])
    for client in open_client(proxy.base, kind=kind, retries=QUICK):
        proxy.drop_answers(1)
        with pytest.raises(Unreachable) as lost:
            client.compact(session_id=session_id, strategy="truncate", dry_run=True)
    assert (lost.value.status, lost.value.code) == (None, "unreachable")
    assert isinstance(lost.value.__cause__, httpx.RemoteProtocolError)
    assert proxy.answers == [("HTTP/1.1 200 OK", True)]


def test_a_503_is_retried_after_its_retry_after_with_the_same_key(
    kind: str, server: Server, direct: ContextdClient, session_id: str
) -> None:
    direct.create_session(session_id=session_id)
    with UnavailableFront(server.base, count=1, retry_after="1") as front:
        for client in open_client(front.base, kind=kind, retries=QUICK):
            started = time.monotonic()
            appended = client.append_items(session_id, items=[user_msg("once")])
            waited = time.monotonic() - started
    assert (appended.first_seq, appended.last_seq) == (1, 1)
    assert [entry.item for entry in direct.iter_items(session_id)] == [user_msg("once")]
    assert [(method, path) for method, path, _ in front.requests] == [
        ("POST", f"/sessions/{session_id}/items")
    ] * 2
    first, again = front.idempotency_keys()
    assert first == again
    assert waited >= 1.0  # the Retry-After was honoured, not a shorter backoff


def test_a_503_that_lasts_raises_unavailable_after_the_last_attempt(
    kind: str, server: Server, session_id: str
) -> None:
    with UnavailableFront(server.base, count=100, retry_after="0") as front:
        for client in open_client(front.base, kind=kind, retries=Retries(attempts=3)):
            with pytest.raises(Unavailable) as unavailable:
                client.assemble(session_id=session_id)
    error = unavailable.value
    assert (error.status, error.code, error.message, error.details, error.retry_after) == (
        503,
        "database_unavailable",
        "the database is unavailable; retry later",
        None,
        0.0,
    )
    assert len(front.requests) == 3


def test_a_retry_after_past_the_total_time_is_not_waited_for(
    kind: str, server: Server, session_id: str
) -> None:
    with UnavailableFront(server.base, count=100, retry_after="30") as front:
        for client in open_client(front.base, kind=kind, timeouts=Timeouts(total=5)):
            with pytest.raises(Unavailable) as unavailable:
                client.get_session(session_id)
    assert unavailable.value.retry_after == 30.0
    assert len(front.requests) == 1


def test_a_service_that_does_not_listen_is_unreachable_after_the_attempts(kind: str) -> None:
    with socket_without_listener() as base:
        for client in open_client(base, kind=kind, retries=Retries(attempts=2, backoff=0.01)):
            with pytest.raises(Unreachable) as unreachable:
                client.compact(items=[user_msg("hi")], strategy="truncate")
    assert isinstance(unreachable.value.__cause__, httpx.ConnectError)
    # Issue 46: which service could not be reached, by its address.
    assert f"POST {base}/compact: ConnectError(" in str(unreachable.value)
