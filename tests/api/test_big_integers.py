"""Integers in a request body: exact up to 4,300 digits, the stated limit, on every route and
whatever the interpreter's own limit; a longer one is a 422 in the service's error shape naming
the limit, and nothing is written. A number inside a string (a call's arguments) is text."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.builders import tool_call, tool_output, user_msg

LIMIT = 4_300
"""The limit the README states."""

AT_THE_LIMIT = int("9" * LIMIT)
POST_JSON = {"content-type": "application/json"}
REFUSAL = {
    "error": {
        "code": "validation_error",
        "message": "integers are kept exact up to 4300 digits, the limit; send a longer number "
        "as a string",
        "details": [{"loc": ["body"], "msg": "an integer of more than 4300 digits"}],
    }
}
BEYOND = {
    "5000_digits": "7" * 5_000,
    "negative_5000_digits": "-" + "7" * 5_000,
    "one_digit_too_many": "1" + "0" * LIMIT,
}


def _item_with(number: str) -> str:
    """An appendable item, as JSON text, holding `number` in a field no provider defines."""
    return '{"type": "message", "role": "user", "content": "hi", "x_meta": {"n": ' + number + "}}"


def _post(client: TestClient, path: str, text: str) -> Any:
    return client.post(path, content=text.encode(), headers=POST_JSON)


def _log(client: TestClient, session_id: str) -> tuple[int, list[dict[str, Any]]]:
    last_seq: int = client.get(f"/sessions/{session_id}").json()["last_seq"]
    return last_seq, client.get(f"/sessions/{session_id}/items").json()["items"]


@pytest.fixture
def started(client: TestClient, session_id: str) -> str:
    """A session whose log already holds one item."""
    client.post("/sessions", json={"session_id": session_id}).raise_for_status()
    first = client.post(f"/sessions/{session_id}/items", json={"items": [user_msg("first")]})
    first.raise_for_status()
    return session_id


@pytest.mark.parametrize("number", BEYOND.values(), ids=BEYOND.keys())
def test_an_integer_beyond_the_limit_is_a_422_naming_it_and_nothing_is_written(
    client: TestClient, started: str, number: str
) -> None:
    before = _log(client, started)
    body = '{"items": [' + _item_with(number) + "]}"
    refused = _post(client, f"/sessions/{started}/items", body)
    assert (refused.status_code, refused.json()) == (422, REFUSAL)
    assert _log(client, started) == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/assemble", '{"sources": [{"source": "s", "items": [{"id": "a", "item": ITEM}]}]}'),
        ("/history/normalize", '{"items": [ITEM]}'),
        ("/compact", '{"session_id": "SESSION", "strategy": "drop_oldest", "x": [ITEM]}'),
    ],
    ids=["assemble", "normalize", "compact"],
)
def test_every_route_refuses_an_integer_beyond_the_limit_alike(
    client: TestClient, started: str, path: str, body: str
) -> None:
    before = _log(client, started)
    text = body.replace("ITEM", _item_with(BEYOND["5000_digits"])).replace("SESSION", started)
    refused = _post(client, path, text)
    assert (refused.status_code, refused.json()) == (422, REFUSAL)
    assert _log(client, started) == before


@pytest.fixture
def interpreter_without_a_limit() -> Iterator[None]:
    """The interpreter's own limit turned off (`PYTHONINTMAXSTRDIGITS=0` does the same)."""
    kept = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(kept)


@pytest.mark.usefixtures("interpreter_without_a_limit")
def test_the_limit_holds_whatever_the_interpreter_allows(client: TestClient, started: str) -> None:
    before = _log(client, started)
    body = '{"items": [' + _item_with(BEYOND["5000_digits"]) + "]}"
    refused = _post(client, f"/sessions/{started}/items", body)
    assert (refused.status_code, refused.json()) == (422, REFUSAL)
    assert _log(client, started) == before


def test_integers_at_the_limit_read_back_exactly(client: TestClient, started: str) -> None:
    numbers = {"most": AT_THE_LIMIT, "least": -AT_THE_LIMIT, "list": [AT_THE_LIMIT, 1]}
    items = [{**user_msg("numbers"), "x_meta": numbers}]
    # The body is encoded here: the standard library writes every digit, as a client would.
    appended = _post(client, f"/sessions/{started}/items", json.dumps({"items": items}))
    assert appended.status_code == 201, appended.text

    _, logged = _log(client, started)
    history = client.get(f"/sessions/{started}/history").json()
    assembly = _post(client, "/assemble", json.dumps({"session_id": started})).json()
    stored = client.get(f"/assemblies/{assembly['assembly_id']}").json()
    normalized = _post(client, "/history/normalize", json.dumps({"items": items})).json()
    assert [entry["item"] for entry in logged[1:]] == items
    assert history["items"][1:] == items
    assert [entry["item"] for entry in assembly["items"]][1:] == items
    assert [entry["item"] for entry in stored["response"]["items"]][1:] == items
    assert normalized["items"] == items


def test_an_integer_inside_call_arguments_is_text_kept_exactly(
    client: TestClient, started: str
) -> None:
    arguments = '{"n": ' + BEYOND["5000_digits"] + "}"
    items = [tool_call("c1", arguments=arguments), tool_output("c1", "done")]
    appended = client.post(f"/sessions/{started}/items", json={"items": items})
    assert appended.status_code == 201, appended.text

    _, logged = _log(client, started)
    anthropic = client.post("/assemble", json={"session_id": started, "output_format": "anthropic"})
    assert [entry["item"] for entry in logged[1:]] == items
    # Anthropic takes an object; arguments the service does not read as one travel as sent.
    assert anthropic.json()["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "c1",
                "name": "shell",
                "input": {"_raw_arguments": arguments},
            }
        ],
    }
