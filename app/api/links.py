"""The contract's links (OpenAPI `links`): which answer names the resource of which operation.

A session created (or a child session forked or delegated) is followed to every operation on
`/sessions/{session_id}`; an assembly to its stored plan and its replay; a stored manifest to
its read. Clients and contract tools walk these; each link's target exists in the document, and
the service answers it for the resource just named (a test follows every one).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

SESSION_OPERATIONS = (
    "get_session",
    "append_items",
    "list_items",
    "report_usage",
    "retract",
    "reset",
    "recall",
    "get_history",
    "put_goal",
    "put_world_state",
    "compaction_advice",
    "context_window",
    "end_session",
    "delegate",
    "fork",
)
"""Operations on `/sessions/{session_id}` that any session answers."""

CHILD_OPERATIONS = (*SESSION_OPERATIONS, "merge")
"""A child session answers `merge` too: its conclusion flows to its parent."""

_SESSION_LINKS = tuple(
    (operation, "The session named.", {"session_id": "$response.body#/session_id"})
    for operation in SESSION_OPERATIONS
)
_CHILD_LINKS = tuple(
    (operation, "The child session just made.", {"session_id": "$response.body#/session_id"})
    for operation in CHILD_OPERATIONS
)

LINKS: dict[tuple[str, str], tuple[tuple[str, str, dict[str, str]], ...]] = {
    ("create_session", "201"): _SESSION_LINKS,
    ("create_session", "200"): _SESSION_LINKS,
    ("delegate", "201"): _CHILD_LINKS,
    ("fork", "201"): _CHILD_LINKS,
    ("assemble", "201"): (
        ("get_assembly", "The plan just stored.", {"assembly_id": "$response.body#/assembly_id"}),
        (
            "replay_assembly",
            "The plan just stored, replayed.",
            {"assembly_id": "$response.body#/assembly_id"},
        ),
    ),
    ("replay_assembly", "201"): (
        ("get_assembly", "The replayed plan.", {"assembly_id": "$request.path.assembly_id"}),
    ),
    ("put_manifest", "200"): (
        ("get_manifest", "The manifest just stored.", {"name": "$request.path.name"}),
    ),
}
"""(source operation, status) -> (target operation, description, parameters) for each link."""


def _link_name(operation_id: str) -> str:
    return "".join(part.capitalize() for part in operation_id.split("_"))


def add_links(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with `LINKS` written into its responses (in place, and returned)."""
    operations = {
        operation["operationId"]: operation
        for path in document["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    for (source, status), targets in LINKS.items():
        response = operations[source]["responses"][status]
        response["links"] = {
            _link_name(target): {
                "operationId": operations[target]["operationId"],
                "description": description,
                "parameters": parameters,
            }
            for target, description, parameters in targets
        }
    return document


def install_links(app: FastAPI) -> None:
    """Makes `app`'s OpenAPI document carry `LINKS` (built once, on first request for it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = add_links(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
