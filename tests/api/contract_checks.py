"""What the contract holds the service to, for the fuzzing in `make test` and `make fuzz`.

Schemathesis' own checks, all of them, with one refinement: a schema-valid request may be
refused with a 422 only when its error code names a rule the operation lists under `x-rules`
in `openapi.yaml` (a rule the schema language cannot state, such as distinct candidate ids).
Any other refusal of valid data is a failure, as schemathesis' `positive_data_acceptance` has
it. Loaded by the CLI as its hooks module (`SCHEMATHESIS_HOOKS`), which registers the check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemathesis
import yaml
from schemathesis import checks

if TYPE_CHECKING:
    from schemathesis.checks import CheckContext
    from schemathesis.core.transport import Response
    from schemathesis.specs.openapi.schemas import OpenApiCase

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.yaml"


def _rules_by_operation(document: dict[str, Any]) -> dict[str, frozenset[str]]:
    """The rule codes each operation lists on its 422, by schemathesis' label (`POST /x`)."""
    return {
        f"{method.upper()} {path}": frozenset(
            rule["code"]
            for rule in operation.get("responses", {}).get("422", {}).get("x-rules", ())
        )
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


RULES_BY_OPERATION = _rules_by_operation(yaml.safe_load(OPENAPI.read_text()))


def _error_code(response: Response) -> object:
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("code") if isinstance(error, dict) else None


@schemathesis.check
def valid_data_accepted_or_stated_rule(
    ctx: CheckContext, response: Response, case: OpenApiCase
) -> bool | None:
    """Valid data is accepted, or refused with a 422 naming a rule the operation lists."""
    stated = RULES_BY_OPERATION.get(case.operation.label, frozenset())
    if response.status_code != 422 or _error_code(response) not in stated:
        checks.positive_data_acceptance(ctx, response, case)  # raises on a refusal
    return None
