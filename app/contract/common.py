"""What the models of more than one router share: the names and counts a request may carry,
the strict base models, JSON Schema for "given" and "exactly one of", and the bodies several
responses carry (the tokenizer, a provider estimate, a conversion report). Field names are the
contract."""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.domain import names
from app.domain.calibration import Family
from app.domain.formats import PlaceholderKind
from app.hooks import FailureReason, HookOutcome

SessionIdText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=names.MAX_LENGTH,
        pattern=names.SESSION_ID_PATTERN,
        description="Letters, digits and `._:-`; not `.` or `..`, which URL clients drop.",
    ),
]
Label = Annotated[
    str, Field(min_length=1, max_length=names.MAX_LENGTH, pattern=names.LABEL_PATTERN)
]
"""A caller-chosen name (see `app.domain.names`)."""
ManifestName = Annotated[
    str, Field(min_length=1, max_length=names.MAX_LENGTH, pattern=names.MANIFEST_NAME_PATTERN)
]


def _whole_number(value: object) -> object:
    """`2.0` is an integer to JSON Schema (a number with a zero fraction), so a request may
    spell one so; a strict model would refuse it. Nothing else is converted: not `true`, not
    `"2"`, not `2.5`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WHOLE_NUMBER = BeforeValidator(_whole_number)
"""Placed after an integer's `Field`, where pydantic still writes its bounds into the schema."""
MAX_SEQ = 2**53 - 1
"""The largest sequence number a request may name: the largest integer every JSON reader holds
exactly (a double, a JavaScript number). The database's 64-bit bound, written as a maximum, is
read by such readers as 2**63, one past it, so the contract would promise what is refused."""
Count = Annotated[int, Field(ge=0, le=10**12), WHOLE_NUMBER]


class StrictModel(BaseModel):
    """Refuses fields it does not name, and converts no scalar into another: `true` is not a
    number, `1` is not a string, `"1"` is not an integer. A request the contract refuses is
    refused here, so what the service accepts is exactly what `openapi.yaml` states."""

    model_config = ConfigDict(extra="forbid", strict=True)


class RequestModel(StrictModel):
    """A whole request body. Its text is valid Unicode: `app.api.json_body` refuses a lone
    UTF-16 surrogate escape before any model sees it."""


def given(name: str) -> dict[str, Any]:
    """JSON Schema for "field `name` is given": present and not null, as handlers read it."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def exactly_one_of(first: str, second: str) -> dict[str, Any]:
    """JSON Schema for "exactly one of two optional fields is given" (see `given`)."""
    return {"if": given(first), "then": {"not": given(second)}, "else": given(second)}


HOOK_OUTCOMES = (
    f"Each hook's outcome: `event`; `outcome` ({', '.join(get_args(HookOutcome))}); `reason`, "
    f"why a call failed or was not made ({', '.join(get_args(FailureReason))}; null otherwise); "
    "`detail`, the same in words (the kind of refused address and the setting that allows it, "
    "the deadline in seconds, the error class of a failed connection, the HTTP status, the "
    "answer limit in bytes) or a veto's reason."
)
"""The description of a response's `hooks`, `HookResult.as_dict` each."""


class TokenizerBody(BaseModel):
    """How the session's provider counts against the session's encoding: every window is in
    provider tokens, every exact count in the encoding, and a whole request is estimated as
    `overhead_tokens` + `ratio` × its exact tokens."""

    family: Family = Field(description="Tokenizer family, from the session's `model`.")
    ratio: float = Field(
        description="Provider tokens per encoding token: the family's default until usage "
        "reports naming their assembly, spread over enough sizes, identify it."
    )
    overhead_tokens: int = Field(
        description="Provider tokens every request has beyond what contextd assembled (tool "
        "definitions, system prompt framing, per-message formatting), fitted from usage "
        "reports; 0 until they show one. At most half of `usable_window`."
    )
    calibrated: bool = Field(description="Whether any usage report has calibrated the session.")
    samples: int = Field(description="Usage reports that calibrated the session.")
    exact: bool = Field(
        description="An OpenAI model counted in its own encoding: `ratio` is 1, always "
        "(`overhead_tokens` is still fitted)."
    )


ProviderEstimate = Annotated[
    int,
    Field(
        description="Estimate (not exact) of the provider's count of a whole request made of "
        "the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × "
        "`tokenizer.ratio`), the overhead included."
    ),
]


class HealthResponse(BaseModel):
    status: str


class DroppedFieldBody(BaseModel):
    index: int
    field: str = Field(description="Path of the provider field, e.g. `is_error`.")


class PlaceholderBody(BaseModel):
    index: int
    kind: PlaceholderKind


class ConversionReportBody(BaseModel):
    """What the output format could not carry. `index` is the item's position in the
    Responses-form list converted (for `/assemble`, its `position`)."""

    excluded: list[dict[str, Any]] = Field(
        description="Items left out: `{index, type, reason}`, reason `foreign_reasoning` "
        "(opaque reasoning of another provider) or `not_expressible`."
    )
    dropped_fields: list[DroppedFieldBody] = Field(
        description="Provider fields of items read in another format that this format has no "
        "place for (e.g. Anthropic `is_error` written as Chat)."
    )
    placeholders: list[PlaceholderBody] = Field(
        description="Content replaced by a short text the provider accepts: an empty tool "
        "output, an image in a Chat tool output (the image follows in a user message), a part "
        "the format cannot carry, or the user turn opening an Anthropic history."
    )
