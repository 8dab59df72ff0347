"""`POST /sessions/{id}/evaluate`: a session's logged turns replayed under named variants of its
settings, and what each would have cost and shown."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.contract.common import WHOLE_NUMBER, Label, RequestModel, StrictModel
from app.contract.sessions import CacheOptions
from app.domain.compaction import Strategy

MAX_VARIANTS = 8
CURRENT = "current"
"""The name of the session's own settings, always evaluated first."""


class EvaluateWatermarks(StrictModel):
    """Compaction watermarks, as shares of the usable window; one left out is the session's."""

    high: Annotated[float, Field(gt=0, le=1)] | None = None
    low: Annotated[float, Field(gt=0, lt=1)] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> EvaluateWatermarks:
        if self.high is not None and self.low is not None and self.low >= self.high:
            raise PydanticCustomError(
                "watermarks_out_of_order",
                "low ({low}) must be below high ({high})",
                {"low": self.low, "high": self.high},
            )
        return self


class EvaluateVariant(StrictModel):
    """One way to run the session. Every field but `name` left out is the session's own."""

    name: Label
    context_window: Annotated[int, Field(gt=0, le=10_000_000), WHOLE_NUMBER] | None = None
    strategy: Strategy | None = Field(
        default=None,
        description="The strategy every advised compaction uses; left out, the one the advice "
        "recommends.",
    )
    watermarks: EvaluateWatermarks | None = None
    keep_recent: Annotated[int, Field(ge=0, le=1_000), WHOLE_NUMBER] | None = Field(
        default=None, description="Each compaction's `keep_recent`."
    )
    follow_advice: bool = Field(
        default=True,
        description="false: the runtime never compacts (the window's fitting does all the work).",
    )
    recall_tool: bool | None = None
    summarizer: Literal["builtin", "client"] = Field(
        default="builtin",
        description="`client`: each product record's summary is the narrative the log recorded "
        "where the session compacted with a summarizer of its own (the newest before the "
        "replayed compaction, each used once), else the built-in one. The replay calls no "
        "summarizer.",
    )
    cache: CacheOptions | None = Field(
        default=None,
        description="Prompt-cache terms to tell the service, over the session's own: its advice "
        "prices the cache by them. The simulated provider keeps the session's terms, so a "
        "variant that tells the service no cache discount (`read_price` 1) shows what advice "
        "blind to the cache would cost.",
    )

    @field_validator("name")
    @classmethod
    def _not_current(cls, name: str) -> str:
        if name == CURRENT:
            raise PydanticCustomError(
                "variant_names", f"{CURRENT!r} names the session's own settings"
            )
        return name


class EvaluateRequest(RequestModel):
    variants: list[EvaluateVariant] = Field(default_factory=list, max_length=MAX_VARIANTS)

    @model_validator(mode="after")
    def _distinct(self) -> EvaluateRequest:
        names = [variant.name for variant in self.variants]
        if len(set(names)) != len(names):
            raise PydanticCustomError("variant_names", "each variant needs a name of its own")
        return self


class VariantSettings(BaseModel):
    """What a variant ran with, every setting resolved."""

    context_window: int
    strategy: Strategy | None = Field(description="null: the advice's recommendation.")
    high_watermark: float
    low_watermark: float
    keep_recent: int
    follow_advice: bool
    recall_tool: bool
    cache: dict[str, int | float] = Field(
        description="The session's `cache` terms the service was told."
    )
    summarizer: Literal["builtin", "client"]


class GradedGrounding(BaseModel):
    """The same measure as the service took it itself, grading each call when its output was
    appended (an assembly's `grounding`)."""

    calls_needing: int
    needed: int
    visible: int
    calls_seeing_all: int


class EvaluationGrounding(BaseModel):
    """Of the identifiers each call's own output went on to use that the history before it
    held (the goal's left out): how many the context showed, how many only an elided fact
    held (one recall away), and how many it held nowhere."""

    calls_needing: int = Field(description="Calls whose output used any such identifier.")
    needed: int
    visible: int
    recallable: int
    missed: int
    visible_share: float
    all_visible_calls: float = Field(description="Share of `calls_needing` that saw them all.")
    calls_seeing_all: int = Field(description="Of `calls_needing`, those that saw them all.")
    misses_by_form: dict[str, int] = Field(
        description="The recallable ones, by the form of the `elided` entry holding them "
        "(`summarized`, `cleared`, `dropped`, `truncated`, ...)."
    )
    calls_hiding: int = Field(description="Calls whose context elided anything.")
    calls_naming_every_seq: int = Field(
        description="Of `calls_hiding`, those whose visible text names every elided entry's "
        "first seq (what a recall starts from)."
    )
    recall_checked: int = Field(
        description="Recallable identifiers searched for with `/recall` over their entry's range."
    )
    recall_confirmed: int = Field(description="Of those, the ones the search handed back.")
    graded: GradedGrounding


class PrefixFigures(BaseModel):
    left_history_calls: int = Field(
        description="Calls whose messages left the previous call's before the end of its "
        "history: a prefix the provider's cache could not serve whole."
    )
    named_breaks: dict[str, int] = Field(
        description="The prefix breaks the service named (`cache.break`), by cause."
    )


class ProviderCacheFigures(BaseModel):
    """The simulated provider against the service's own prediction of each call."""

    expired_calls: int = Field(
        description="Calls an expired entry would have served more, had it not expired."
    )
    predicted_unexpired_tokens: int = Field(
        description="The service's predicted reused prefix over the calls without expiry, under "
        "the provider's minimum prefix and blocks."
    )
    cached_unexpired_tokens: int = Field(description="What the provider served of those calls.")
    misses: int = Field(description="Calls the provider served less than the service predicted.")
    misses_by_class: dict[str, int] = Field(
        description="The class the service gave each miss when its usage was reported "
        "(`cache_outcome`)."
    )
    unclassified_misses: int


class VariantResult(BaseModel):
    name: str
    settings: VariantSettings
    calls: int
    input_tokens: int
    reused_tokens: int = Field(
        description="Tokens of the leading messages identical to the previous call's."
    )
    reuse: float
    fresh_tokens: int
    cached_tokens: int = Field(description="What a simulated provider cache served.")
    written_tokens: int = Field(description="What it wrote into its cache.")
    cost: float = Field(
        description="In fresh input tokens, in the session's cache terms: uncached input at 1, "
        "cached at the read price, the write premium on what is written."
    )
    compactions: int
    compactions_per_100: float
    recorded_summaries: int = Field(
        description="Compactions whose record used the summary the log recorded (`client`)."
    )
    peak_tokens: int
    goal_calls: int = Field(description="Calls with a goal to keep.")
    goal_kept: float | None = Field(
        description="Share of `goal_calls` showing the goal (null: none)."
    )
    goal_kept_calls: int
    pairing_kept: float = Field(description="Share of calls whose tool calls and outputs pair.")
    pairing_kept_calls: int
    over_budget_calls: int
    grounding: EvaluationGrounding
    predicted_reused_tokens: int = Field(
        description="The reused prefix the service predicted (`cache.reused_prefix_tokens`), "
        "summed."
    )
    restated_tokens: int = Field(description="Tokens of the goal's restatement at the end, summed.")
    history_cut_calls: int = Field(
        description="Calls whose assembly had to cut the history: its oldest items left the "
        "context without a compaction's record of them."
    )
    prefix: PrefixFigures
    provider_cache: ProviderCacheFigures


class EvaluateResponse(BaseModel):
    session_id: str
    last_seq: int = Field(description="The log was replayed up to this seq.")
    calls: int = Field(description="Model calls in the log: where a run of model output starts.")
    variants: list[VariantResult] = Field(description="`current` first, then the request's.")


class EvaluationProgress(BaseModel):
    calls_done: int
    calls_total: int = Field(description="The calls the replay makes over all its variants.")


class EvaluationJobResponse(BaseModel):
    """An evaluation run as a job: `GET /evaluations/{id}` while it runs, and after."""

    evaluation_id: str
    session_id: str
    status: Literal["running", "done", "failed", "cancelled"]
    progress: EvaluationProgress
    result: EvaluateResponse | None = Field(description="The evaluation, once `done`.")
    error: str | None = Field(
        description="Why it `failed`: the replay's error, the service stopping, or the job lost"
        " with its process (a restart)."
    )
    created_at: datetime
    updated_at: datetime = Field(description="When its runner last wrote its progress.")
