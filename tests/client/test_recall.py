"""The recall tool the adapters offer is the one the service offers in every session-mode
assembly (a drift check, like the models'), and a model's arguments become a request or a
sentence for the model, never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from contextd_client import ContextdClient, ValidationFailed
from contextd_client.recall import (
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_NAME,
    InvalidArguments,
    recall_request,
    recall_tool_parameters,
    refusal_output,
)
from tests.client.conftest import API_KEY
from tests.e2e.servers import Server


def test_the_recall_tool_is_the_one_every_session_mode_assembly_offers(
    server: Server, session_id: str
) -> None:
    with ContextdClient(server.base, api_key=API_KEY) as client:
        client.create_session(session_id=session_id)
        offered = client.assemble(session_id=session_id, output_format="responses").tools

    assert offered == [
        {
            "type": "function",
            "name": RECALL_TOOL_NAME,
            "description": RECALL_TOOL_DESCRIPTION,
            "parameters": recall_tool_parameters(),
            "strict": False,
        }
    ]


def test_each_copy_of_the_parameters_is_new_and_shares_no_part() -> None:
    mine = recall_tool_parameters()
    mine["properties"]["seq"]["minimum"] = 1  # as a framework might
    assert "minimum" not in mine["properties"]["from_seq"]
    assert recall_tool_parameters()["properties"]["seq"] == {"type": "integer"}


@pytest.mark.parametrize(
    ("arguments", "body"),
    [
        ('{"seq": 7, "pattern": "def \\\\w+"}', {"seq": 7, "pattern": "def \\w+"}),
        ({"seq": 7, "from_line": 3}, {"seq": 7, "from_line": 3}),
        ("", {}),
        ('{"seq": "seven", "unknown": true}', {"seq": "seven", "unknown": True}),
    ],
)
def test_arguments_go_to_the_service_as_the_model_gave_them(
    arguments: str | dict[str, Any], body: dict[str, Any]
) -> None:
    assert recall_request(arguments) == body


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("[7]", "the arguments must be a JSON object, not '[7]'"),
        ("7", "the arguments must be a JSON object, not '7'"),
        ('{"seq": 7', "the arguments are not valid JSON: Expecting ',' delimiter: line 1 column"),
    ],
)
def test_arguments_that_are_no_json_object_are_refused_with_a_sentence(
    arguments: str, reason: str
) -> None:
    with pytest.raises(InvalidArguments) as refused:
        recall_request(arguments)
    assert str(refused.value).startswith(reason)


def test_a_refusal_is_its_message_with_the_details_it_does_not_already_say() -> None:
    generic = ValidationFailed(
        "the request failed validation",
        status=422,
        code="validation_error",
        details=[
            {"loc": ["body", "seq"], "msg": "Input should be a valid integer"},
            {"loc": ["body"], "msg": "give `seq` (one fact) or `from_seq`/`to_seq` (a search)"},
        ],
    )
    pattern = ValidationFailed(
        "invalid pattern: missing ): (a",
        status=422,
        code="validation_error",
        details=[{"loc": ["body", "pattern"], "msg": "missing ): (a"}],
    )
    assert [refusal_output(generic), refusal_output(pattern)] == [
        "the request failed validation; seq: Input should be a valid integer;"
        " give `seq` (one fact) or `from_seq`/`to_seq` (a search)",
        "invalid pattern: missing ): (a",
    ]
