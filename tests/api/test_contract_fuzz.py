"""Property-based fuzzing of the committed OpenAPI contract (schemathesis), on PostgreSQL.

Every generated request must get a documented status code, a body matching its schema, and
never a 5xx: one operation at a time, and in sequences that chain operations through the links
schemathesis infers from the contract (a session created, then appended to, forked, reset...).
The example count is bounded here; `make fuzz` runs a larger campaign.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.specs.openapi.schemas import OpenApiSchema

from app.main import create_app
from app.settings import Settings

if TYPE_CHECKING:
    # schemathesis defines its `Case[OpenApiOperation]` alias for type checkers only.
    from schemathesis.specs.openapi.schemas import OpenApiCase

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.yaml"
# The contract's promises: no 5xx, documented status codes, bodies and headers as declared,
# and what the schema refuses is refused (types are strict, constraints are stated).
# (Positive-data acceptance is left out while a few rules the schema language cannot state,
# such as distinct candidate ids or a low watermark below the high one, still answer 422.)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    checks.unsupported_method,
    checks.negative_data_rejection,
    checks.missing_required_header,
    checks.allow_header_conformance,
]
EXAMPLES = int(os.environ.get("CTX_FUZZ_EXAMPLES", "15"))


contract: OpenApiSchema = schemathesis.openapi.from_path(OPENAPI)


@pytest.fixture(scope="module")
def app(postgres_url: str) -> FastAPI:
    """Requests go straight to the ASGI app (no network), backed by the test PostgreSQL."""
    return create_app(Settings(database_url=postgres_url))


@contract.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_honours_its_contract(case: OpenApiCase, app: FastAPI) -> None:
    case.call_and_validate(app=app, base_url="http://localhost", checks=CHECKS)


STATEFUL_TENANTS = 10_000
"""Static tenants for the sequences: each run takes one, so none sees what an earlier run made
(hypothesis replays a run and needs it to find the same state)."""


def test_api_honours_its_contract_over_call_sequences(postgres_url: str) -> None:
    keys = [f"fuzz-{n}:key-fuzz-{n}" for n in range(STATEFUL_TENANTS)]
    service = create_app(Settings(database_url=postgres_url, api_keys=keys))
    sequences: OpenApiSchema = schemathesis.openapi.from_path(OPENAPI)
    sequences.app = service
    tenants = itertools.count()

    class Calls(sequences.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.key = f"key-fuzz-{next(tenants) % STATEFUL_TENANTS}"

        def before_call(self, case: OpenApiCase, **kwargs: Any) -> None:
            case.headers["Authorization"] = f"Bearer {self.key}"

        def validate_response(
            self, response: Any, case: OpenApiCase, additional_checks: Any = (), **kwargs: Any
        ) -> None:
            case.validate_response(response, checks=CHECKS)

    Calls.run(
        settings=settings(
            max_examples=EXAMPLES,
            deadline=None,
            stateful_step_count=8,
            suppress_health_check=list(HealthCheck),
        )
    )
