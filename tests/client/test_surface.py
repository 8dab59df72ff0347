"""The clients cover the contract: every operation of openapi.yaml is a method of both, taking
exactly its path parameters (positionally), its query parameters and its body's fields."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest

from contextd_client import AsyncContextdClient, ContextdClient
from tests.client.conftest import CONTRACT

OPERATIONS = {
    operation["operationId"]: operation
    for methods in CONTRACT["paths"].values()
    for operation in methods.values()
}
EXTRA_METHODS = {"iter_items", "close", "aclose"}
"""Methods that are no operation: paging over list_items, and closing the connections."""


def _public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if name[0] != "_"}


def _parameters(cls: type, name: str) -> dict[str, Any]:
    """The method's parameters by kind: positional, keyword and the body's fields."""
    signature = inspect.signature(getattr(cls, name))
    parameters = list(signature.parameters.values())[1:]
    hints = typing.get_type_hints(getattr(cls, name))
    body: set[str] = set()
    for parameter in parameters:
        if parameter.kind is parameter.VAR_KEYWORD:
            (fields,) = typing.get_args(hints[parameter.name])
            body = set(typing.get_type_hints(fields))
    return {
        "positional": [p.name for p in parameters if p.kind is p.POSITIONAL_ONLY],
        "keyword": {p.name for p in parameters if p.kind is p.KEYWORD_ONLY},
        "body": body,
    }


def _contract_parameters(operation: dict[str, Any]) -> dict[str, Any]:
    declared = operation.get("parameters", [])
    body_schema = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema")
    )
    body: set[str] = set()
    if body_schema is not None:
        name = body_schema["$ref"].rsplit("/", 1)[-1]
        body = set(CONTRACT["components"]["schemas"][name]["properties"])
    return {
        "positional": len([p for p in declared if p["in"] == "path"]),
        "keyword": {p["name"] for p in declared if p["in"] == "query"},
        "body": body,
    }


@pytest.mark.parametrize("cls", [ContextdClient, AsyncContextdClient])
def test_every_operation_is_a_method_and_every_method_an_operation(cls: type) -> None:
    assert _public_methods(cls) - EXTRA_METHODS == set(OPERATIONS)


@pytest.mark.parametrize("operation_id", sorted(OPERATIONS))
def test_a_method_takes_exactly_its_operations_parameters(operation_id: str) -> None:
    contract = _contract_parameters(OPERATIONS[operation_id])
    method = _parameters(ContextdClient, operation_id)
    assert {**method, "positional": len(method["positional"])} == {
        **contract,
        # /metrics takes the scrape token in a header of its own, not the client's API key;
        # evaluate follows a job every `poll_seconds` to its result.
        "keyword": contract["keyword"]
        | ({"token"} if operation_id == "metrics" else set())
        | ({"poll_seconds"} if operation_id == "evaluate" else set()),
    }


@pytest.mark.parametrize("name", sorted(_public_methods(ContextdClient) - {"close"}))
def test_both_clients_have_one_signature(name: str) -> None:
    sync, asynchronous = getattr(ContextdClient, name), getattr(AsyncContextdClient, name)
    assert inspect.signature(sync).parameters == inspect.signature(asynchronous).parameters
    if name == "iter_items":
        assert inspect.isasyncgenfunction(asynchronous)
    else:
        assert inspect.iscoroutinefunction(asynchronous)


def test_query_vocabularies_are_the_contracts() -> None:
    (history,) = [
        p for p in OPERATIONS["get_history"]["parameters"] if p["name"] == "output_format"
    ]
    hints = typing.get_type_hints(ContextdClient.get_history)
    (formats, _none) = typing.get_args(hints["output_format"])
    assert list(typing.get_args(formats)) == history["schema"]["enum"]
    (modalities, _none) = typing.get_args(hints["input_modalities"])
    (modality,) = typing.get_args(modalities)
    # The query spells them as a comma-separated list; the bodies name the same values.
    normalize = CONTRACT["components"]["schemas"]["NormalizeRequest"]["properties"]
    assert list(typing.get_args(modality)) == normalize["input_modalities"]["items"]["enum"]
