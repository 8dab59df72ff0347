"""Provider tokens: how a session's exact counts (in its tiktoken encoding) relate to the tokens
its model's provider counts for a whole request, and how the provider's usage reports calibrate
that relation.

Invariants:

- A session's provider counts a request as `overhead + ratio × tokens`: `tokens` the exact
  count of what contextd assembled, `ratio` provider tokens per encoding token, `overhead` the
  provider tokens of what contextd never sees (tool definitions, the system prompt's framing,
  per-message formatting). Its window (`usable_window`) is in provider tokens: assembly fits
  `floor((usable − overhead) / ratio)` encoding tokens, advice weighs the active tokens against
  that, and every estimate is of a whole request, `ceil(overhead + ratio × tokens)`. Exact
  counts stay exact everywhere; an estimate is always labelled as one.
- The family comes from the session's `model` label (`family_of`): names containing "claude"
  or starting "anthropic." are `anthropic`; names containing "gemini" or "gemma" are `google`;
  names tiktoken maps to an encoding (as given, or after a routing prefix such as "openai/")
  are `openai`; anything else is `other`.
- Exact: an OpenAI model whose tiktoken encoding is the session's own. Its ratio is 1 and no
  report ever changes it; its overhead is learned like any other session's, since the
  provider counts tool definitions and framing whatever the tokenizer.
- Every other session starts from its family's default ratio (`DEFAULT_RATIOS`), chosen
  high: an over-estimate makes compaction fire early, an under-estimate makes the request
  overflow. Claude and Gemini sessions were measured 15–40% over o200k_base (issue 16), so
  anthropic 1.35, near the top of that range, and google 1.2; an OpenAI model counted in the
  other shipped encoding 1.1 (the two differ by a few percent on English, more on other
  scripts); a named model of unknown tokenizer 1.25. A session that names no model keeps the
  service's counts (1.0) until its usage says otherwise: nothing is known to correct for, and
  such sessions keep the window they had before calibration existed. Every session starts
  with overhead 0.
- Calibration (`calibrate`) is exponentially weighted least squares of y (a report's
  `input_tokens`) on x (the exact `total_tokens` of the assembly it names), kept as decayed
  weighted moments (`Moments`: weight, means, variance of x, covariance): O(1) per report,
  deterministic, no samples stored. Each report weighs 1 and every earlier one `DECAY` times
  what it weighed before. From the moments after each report:
  - the ratio is the fitted slope, bounded to `RATIO_BOUNDS`, when the reports' x values are
    spread enough to identify it (`Moments.is_spread`: their weighted standard deviation at
    least `MIN_SPREAD` of their weighted mean); otherwise it stays what it was (the family's
    default until a slope was first identified) and the rest is attributed to overhead;
  - the overhead is `mean(y) − ratio × mean(x)`, the line through the reports' weighted
    centroid. Where that is negative the reports say the ratio is lower, not that the overhead
    is: the ratio becomes `mean(y) / mean(x)` (bounded) and the overhead 0. The overhead is
    bounded to [0, `OVERHEAD_SHARE` of the usable window], so the encoding window is never
    less than half the window the ratio alone gives, and one bad report can move neither
    number past its bound. An exact session's ratio stays 1 and only its overhead is fitted.
- An assembly counts once: the newest `REMEMBERED_ASSEMBLIES` calibrated ids are kept and a
  report naming one of them changes nothing.
- A stored calibration of the ratio-only model (ratio, samples, assemblies) reads as overhead
  0 with no moments: the next report continues from its ratio as from a default.
- The stable cut step of a session's history (`SessionWindow.cut_step`) is taken at the
  session's starting ratio and the whole usable window, not the calibrated ratio and
  overhead: every report moves them a little, and a step that moved with them would move the
  cut points, and with them the prompt-cache prefix, on every call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from app.domain.advice import Watermarks
from app.domain.budget import HISTORY_CUT_STEP

__all__ = [
    "DECAY",
    "DEFAULT_RATIOS",
    "MIN_SPREAD",
    "OVERHEAD_SHARE",
    "RATIO_BOUNDS",
    "REMEMBERED_ASSEMBLIES",
    "UNNAMED_RATIO",
    "Family",
    "ModelEncoding",
    "Moments",
    "Observation",
    "SessionWindow",
    "Tokenizer",
    "calibrate",
    "family_of",
    "session_tokenizer",
]

Family = Literal["openai", "anthropic", "google", "other"]
ModelEncoding = Callable[[str], str | None]
"""The tiktoken encoding an OpenAI model name maps to; None for a name tiktoken does not know."""

DEFAULT_RATIOS: Mapping[Family, float] = MappingProxyType(
    {"anthropic": 1.35, "google": 1.2, "openai": 1.1, "other": 1.25}
)
UNNAMED_RATIO = 1.0
"""The starting ratio of a session that names no model."""
DECAY = 0.9
"""What a report's weight in the fit is multiplied by at every later report: the fit remembers
about 1 / (1 − DECAY) = 10 reports, enough to see a history grow, few enough to follow a
change of tools."""
MIN_SPREAD = 0.2
"""The slope is identified once the reports' assembled tokens have a weighted standard
deviation of at least this share of their weighted mean."""
RATIO_BOUNDS = (0.75, 2.5)
OVERHEAD_SHARE = 0.5
"""The overhead is at most this share of the usable window."""
REMEMBERED_ASSEMBLIES = 16
_DIGITS = 4
"""Ratios are kept to this many decimals (overheads to whole tokens): every answer stays
readable."""


def _openai_encoding(model: str, model_encoding: ModelEncoding) -> str | None:
    """The encoding tiktoken gives the model, by its name or its name after a routing prefix."""
    return model_encoding(model) or (
        model_encoding(model.rsplit("/", 1)[-1]) if "/" in model else None
    )


def family_of(model: str | None, *, model_encoding: ModelEncoding) -> Family:
    """The tokenizer family of a session's `model` label (see the module docstring)."""
    if not model:
        return "other"
    name = model.lower()
    if "claude" in name or name.startswith("anthropic."):
        return "anthropic"
    if "gemini" in name or "gemma" in name:
        return "google"
    if _openai_encoding(model, model_encoding) is not None:
        return "openai"
    return "other"


def _bounded(ratio: float) -> float:
    low, high = RATIO_BOUNDS
    return round(min(high, max(low, ratio)), _DIGITS)


def _max_overhead(usable: int) -> int:
    return math.floor(usable * OVERHEAD_SHARE)


@dataclass(frozen=True)
class Moments:
    """The exponentially weighted moments of a session's reports, x the exact tokens of the
    assembly a report names and y its provider input tokens: the total weight, the weighted
    means, the weighted variance of x and covariance of x and y. Central moments, updated
    one report at a time (West's update), stay accurate where raw sums of squares of counts in
    the hundred thousands would cancel."""

    weight: float = 0.0
    mean_x: float = 0.0
    mean_y: float = 0.0
    var_x: float = 0.0
    cov_xy: float = 0.0

    def add(self, x: float, y: float) -> Moments:
        """These moments with every weight decayed and one report of weight 1 added."""
        kept = DECAY * self.weight
        weight = kept + 1
        dx = x - self.mean_x
        mean_x = self.mean_x + dx / weight
        mean_y = self.mean_y + (y - self.mean_y) / weight
        return Moments(
            weight=weight,
            mean_x=mean_x,
            mean_y=mean_y,
            var_x=(kept * self.var_x + dx * (x - mean_x)) / weight,
            cov_xy=(kept * self.cov_xy + dx * (y - mean_y)) / weight,
        )

    @property
    def is_spread(self) -> bool:
        """Whether the x values identify a slope (see `MIN_SPREAD`)."""
        return self.var_x > 0 and self.var_x >= (MIN_SPREAD * self.mean_x) ** 2


def _fit(moments: Moments, *, ratio: float, exact: bool, max_overhead: int) -> tuple[float, int]:
    """The ratio and overhead the moments support, `ratio` the one in effect before them (see
    the module docstring)."""
    if not exact and moments.is_spread:
        ratio = _bounded(moments.cov_xy / moments.var_x)
    overhead = moments.mean_y - ratio * moments.mean_x
    if overhead < 0 and not exact:
        ratio, overhead = _bounded(moments.mean_y / moments.mean_x), 0.0
    return ratio, min(max_overhead, max(0, round(overhead)))


@dataclass(frozen=True)
class Tokenizer:
    """What a session's provider counts, as far as contextd knows: the family, the ratio of
    provider tokens per encoding token (and the one it started from, `prior`), the overhead
    the provider adds to every request, how many reports calibrated them, which assemblies
    those reports named (so that none counts twice) and the fit's moments."""

    family: Family
    ratio: float
    prior: float
    overhead: int = 0
    exact: bool = False
    samples: int = 0
    assemblies: tuple[str, ...] = ()
    moments: Moments = Moments()

    @property
    def is_calibrated(self) -> bool:
        return self.samples > 0

    def provider_tokens(self, tokens: int) -> int:
        """The provider's count of a whole request whose assembled part is `tokens` exact
        tokens, estimated (rounded up)."""
        # Rounded first: 100 × 1.1 is 110.00000000000001 in binary floating point.
        return math.ceil(round(self.overhead + tokens * self.ratio, 6))

    def encoding_tokens(self, provider_tokens: int) -> int:
        """The encoding tokens a request of at most `provider_tokens` may assemble, beside its
        overhead (rounded down, at least 1)."""
        return max(1, math.floor(round((provider_tokens - self.overhead) / self.ratio, 6)))

    def beyond_overhead(self, tokens: int) -> int:
        """Of `tokens` encoding tokens sent with every request beside the assembled context
        (contextd's own tool definitions), those the fitted overhead does not already hold:
        usage reports count them, so a calibrated overhead has learned them."""
        return max(0, tokens - math.floor(self.overhead / self.ratio))

    def as_dict(self) -> dict[str, Any]:
        """The wire form (`tokenizer` in responses)."""
        return {
            "family": self.family,
            "ratio": self.ratio,
            "overhead_tokens": self.overhead,
            "calibrated": self.is_calibrated,
            "samples": self.samples,
            "exact": self.exact,
        }

    def state(self) -> dict[str, Any]:
        """What is stored with the session (the family and exactness follow from its model)."""
        return {
            "ratio": self.ratio,
            "overhead": self.overhead,
            "samples": self.samples,
            "assemblies": list(self.assemblies),
            "moments": asdict(self.moments),
        }


def session_tokenizer(
    model: str | None,
    *,
    encoding: str,
    state: Mapping[str, Any] | None,
    model_encoding: ModelEncoding,
    usable: int,
) -> Tokenizer:
    """A session's tokenizer, from its model label, its encoding, its stored calibration (of
    either shape, see the module docstring) and its usable window (which bounds the
    overhead)."""
    family = family_of(model, model_encoding=model_encoding)
    exact = (
        family == "openai"
        and model is not None
        and _openai_encoding(model, model_encoding) == encoding
    )
    prior = 1.0 if exact else DEFAULT_RATIOS[family] if model else UNNAMED_RATIO
    tokenizer = Tokenizer(family=family, ratio=prior, prior=prior, exact=exact)
    if not state:
        return tokenizer
    return replace(
        tokenizer,
        ratio=prior if exact else _bounded(float(state["ratio"])),
        overhead=min(_max_overhead(usable), max(0, int(state.get("overhead", 0)))),
        samples=int(state["samples"]),
        assemblies=tuple(state["assemblies"]),
        moments=Moments(**state.get("moments", {})),
    )


@dataclass(frozen=True)
class Observation:
    """One report's effect: the tokenizer after it, what the tokenizer before it predicted
    for the whole request (`Tokenizer.provider_tokens`) and how far that was from the report
    (|predicted − reported| / reported)."""

    tokenizer: Tokenizer
    predicted: int
    drift: float


def calibrate(
    tokenizer: Tokenizer,
    *,
    assembly_id: str,
    input_tokens: int,
    assembled_tokens: int,
    usable: int,
) -> Observation | None:
    """`tokenizer` after a usage report of `input_tokens` for an assembly of `assembled_tokens`
    exact tokens, in a session of `usable` provider tokens; None when the report cannot
    calibrate it (a count of zero, an assembly already counted)."""
    if input_tokens <= 0 or assembled_tokens <= 0 or assembly_id in tokenizer.assemblies:
        return None
    moments = tokenizer.moments.add(assembled_tokens, input_tokens)
    ratio, overhead = _fit(
        moments,
        ratio=tokenizer.ratio,
        exact=tokenizer.exact,
        max_overhead=_max_overhead(usable),
    )
    predicted = tokenizer.provider_tokens(assembled_tokens)
    updated = replace(
        tokenizer,
        ratio=ratio,
        overhead=overhead,
        samples=tokenizer.samples + 1,
        assemblies=(*tokenizer.assemblies, assembly_id)[-REMEMBERED_ASSEMBLIES:],
        moments=moments,
    )
    return Observation(
        tokenizer=updated,
        predicted=predicted,
        drift=abs(predicted - input_tokens) / input_tokens,
    )


@dataclass(frozen=True)
class SessionWindow:
    """A session's one window: `usable` provider tokens (its context window less the output
    reserve), the watermarks compaction works between, and the tokenizer that converts."""

    usable: int
    watermarks: Watermarks
    tokenizer: Tokenizer

    @property
    def tokens(self) -> int:
        """The usable window in the session's encoding, beside the overhead: what assembly
        fits and advice weighs."""
        return self.tokenizer.encoding_tokens(self.usable)

    @property
    def cut_step(self) -> int:
        """Encoding tokens between the history's stable cut points, at the session's starting
        ratio over the whole usable window (see the module docstring: calibration never moves
        a cut point)."""
        return max(1, int(HISTORY_CUT_STEP * self.usable / self.tokenizer.prior))
