"""Error answers raise the class of their status, carrying the service's code, message and
details, from both clients."""

from __future__ import annotations

import pytest

from contextd_client import (
    Conflict,
    ContextdClient,
    ContextdError,
    NotFound,
    SequenceConflict,
    Unauthorized,
    ValidationFailed,
)
from tests.builders import user_msg
from tests.client.conftest import CONTRACT, open_client
from tests.e2e.servers import Server

SESSION_ID_PATTERN = CONTRACT["components"]["schemas"]["CreateSessionRequest"]["properties"][
    "session_id"
]["anyOf"][0]["pattern"]


def _shape(error: ContextdError) -> tuple[type, int | None, str, str, object]:
    return type(error), error.status, error.code, error.message, error.details


def test_a_missing_session_is_not_found(ctx: ContextdClient) -> None:
    with pytest.raises(NotFound) as missing:
        ctx.get_session("no-such-session")
    assert _shape(missing.value) == (
        NotFound,
        404,
        "not_found",
        "session 'no-such-session' not found; create it with POST /sessions",
        None,
    )


def test_a_stale_expected_last_seq_is_a_sequence_conflict(
    ctx: ContextdClient, session_id: str
) -> None:
    ctx.create_session(session_id=session_id)
    ctx.append_items(session_id, items=[user_msg("first")])
    with pytest.raises(SequenceConflict) as stale:
        ctx.append_items(session_id, items=[user_msg("second")], expected_last_seq=0)
    assert _shape(stale.value) == (
        SequenceConflict,
        409,
        "sequence_conflict",
        "expected last_seq 0 but the session is at 1; nothing was written",
        {"expected": 0, "actual": 1},
    )
    assert (stale.value.expected, stale.value.actual) == (0, 1)
    assert isinstance(stale.value, Conflict)
    assert ctx.get_session(session_id).last_seq == 1


def test_a_session_created_again_differently_is_a_conflict(
    ctx: ContextdClient, session_id: str
) -> None:
    ctx.create_session(session_id=session_id, context_window=10_000)
    with pytest.raises(Conflict) as differs:
        ctx.create_session(session_id=session_id, context_window=20_000)
    assert (type(differs.value), differs.value.status, differs.value.code) == (
        Conflict,
        409,
        "conflict",
    )


def test_an_invalid_body_fails_validation_with_its_details(ctx: ContextdClient) -> None:
    with pytest.raises(ValidationFailed) as invalid:
        ctx.create_session(session_id="not valid!")
    # Issue 46: the error says which field and what it should be, not only `.details`.
    assert str(invalid.value) == (
        "422 validation_error: the request failed validation; session_id: String should "
        f"match pattern '{SESSION_ID_PATTERN}'"
    )
    assert _shape(invalid.value) == (
        ValidationFailed,
        422,
        "validation_error",
        "the request failed validation",
        [
            {
                "loc": ["body", "session_id"],
                "msg": f"String should match pattern '{SESSION_ID_PATTERN}'",
            }
        ],
    )


def test_a_recall_past_the_log_is_a_conflict_and_a_bad_pattern_names_its_rule(
    ctx: ContextdClient, session_id: str
) -> None:
    ctx.create_session(session_id=session_id)
    ctx.append_items(session_id, items=[user_msg("first")])
    with pytest.raises(Conflict) as past:
        ctx.recall(session_id, seq=2)
    assert _shape(past.value) == (
        Conflict,
        409,
        "seq_past_log",
        "session has no seq 2 (its last is 1)",
        None,
    )
    with pytest.raises(ValidationFailed) as invalid:
        ctx.recall(session_id, seq=1, pattern="(unclosed")
    assert _shape(invalid.value) == (
        ValidationFailed,
        422,
        "invalid_pattern",
        "invalid pattern: missing ): (unclosed",
        [{"loc": ["body", "pattern"], "msg": "missing ): (unclosed"}],
    )


@pytest.mark.parametrize("api_key", [None, "not-a-key"])
def test_a_missing_or_unknown_key_is_unauthorized(
    server: Server, kind: str, api_key: str | None
) -> None:
    for client in open_client(server.base, kind=kind, api_key=api_key):
        with pytest.raises(Unauthorized) as refused:
            client.get_session("any")
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    assert refused.value.message
