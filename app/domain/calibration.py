"""Provider tokens: how a session's exact counts (in its tiktoken encoding) relate to the tokens
its model's provider counts, and how the provider's usage reports calibrate that relation.

Invariants:

- A session's `ratio` is provider tokens per encoding token. Its window (`usable_window`) is in
  provider tokens: assembly fits `floor(usable / ratio)` encoding tokens, advice weighs the
  active tokens against that, and every estimate is `ceil(tokens × ratio)`. Exact counts stay
  exact everywhere; an estimate is always labelled as one.
- The family comes from the session's `model` label (`family_of`): names containing "claude"
  or starting "anthropic." are `anthropic`; names containing "gemini" or "gemma" are `google`;
  names tiktoken maps to an encoding (as given, or after a routing prefix such as "openai/")
  are `openai`; anything else is `other`.
- Exact: an OpenAI model whose tiktoken encoding is the session's own. Its ratio is 1 and no
  report ever changes it.
- Every other session starts from its family's default ratio (`DEFAULT_RATIOS`), chosen
  high: an over-estimate makes compaction fire early, an under-estimate makes the request
  overflow. Claude and Gemini sessions were measured 15–40% over o200k_base (issue 16), so
  anthropic 1.35, near the top of that range, and google 1.2; an OpenAI model counted in the
  other shipped encoding 1.1 (the two differ by a few percent on English, more on other
  scripts); a named model of unknown tokenizer 1.25. A session that names no model keeps the
  service's counts (1.0) until its usage says otherwise: nothing is known to correct for, and
  such sessions keep the window they had before calibration existed.
- Calibration (`calibrate`): a usage report naming its assembly observes
  `input_tokens / total_tokens` of that assembly. The observation is clamped to `RATIO_BOUNDS`
  (one bad report cannot wreck a budget); the first one replaces the default, each later one
  moves the ratio `SMOOTHING` of the way towards it. The ratio therefore always lies within the
  bounds. An assembly counts once: the newest `REMEMBERED_ASSEMBLIES` calibrated ids are kept
  and a report naming one of them changes nothing.
- The stable cut step of a session's history (`SessionWindow.cut_step`) is taken at the
  session's starting ratio, not the calibrated one: every report moves the ratio a little, and
  a step that moved with it would move the cut points, and with them the prompt-cache prefix,
  on every call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from app.domain.advice import Watermarks
from app.domain.budget import HISTORY_CUT_STEP

__all__ = [
    "DEFAULT_RATIOS",
    "RATIO_BOUNDS",
    "REMEMBERED_ASSEMBLIES",
    "SMOOTHING",
    "UNNAMED_RATIO",
    "Family",
    "ModelEncoding",
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
SMOOTHING = 0.3
"""Share of the way from the current ratio to a new observation that one report moves it."""
RATIO_BOUNDS = (0.75, 2.5)
REMEMBERED_ASSEMBLIES = 16
_DIGITS = 4
"""Ratios are kept to this many decimals: the stored state and every answer stay readable."""


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
    return min(high, max(low, ratio))


@dataclass(frozen=True)
class Tokenizer:
    """What a session's provider counts, as far as contextd knows: the family, the ratio of
    provider tokens per encoding token (and the one it started from, `prior`), how many reports
    calibrated it, and which assemblies they named (so that none counts twice)."""

    family: Family
    ratio: float
    prior: float
    exact: bool = False
    samples: int = 0
    assemblies: tuple[str, ...] = ()

    @property
    def is_calibrated(self) -> bool:
        return self.samples > 0

    def provider_tokens(self, tokens: int) -> int:
        """The provider's count estimated from an exact count (rounded up)."""
        # Rounded first: 100 × 1.1 is 110.00000000000001 in binary floating point.
        return math.ceil(round(tokens * self.ratio, 6))

    def encoding_tokens(self, provider_tokens: int) -> int:
        """The encoding tokens that make at most `provider_tokens` (rounded down, at least 1)."""
        return max(1, math.floor(round(provider_tokens / self.ratio, 6)))

    def as_dict(self) -> dict[str, Any]:
        """The wire form (`tokenizer` in responses)."""
        return {
            "family": self.family,
            "ratio": self.ratio,
            "calibrated": self.is_calibrated,
            "samples": self.samples,
            "exact": self.exact,
        }

    def state(self) -> dict[str, Any]:
        """What is stored with the session (the family and exactness follow from its model)."""
        return {"ratio": self.ratio, "samples": self.samples, "assemblies": list(self.assemblies)}


def session_tokenizer(
    model: str | None,
    *,
    encoding: str,
    state: Mapping[str, Any] | None,
    model_encoding: ModelEncoding,
) -> Tokenizer:
    """A session's tokenizer, from its model label, its encoding and its stored calibration."""
    family = family_of(model, model_encoding=model_encoding)
    if family == "openai" and model and _openai_encoding(model, model_encoding) == encoding:
        return Tokenizer(family=family, ratio=1.0, prior=1.0, exact=True)
    prior = DEFAULT_RATIOS[family] if model else UNNAMED_RATIO
    if state:
        return Tokenizer(
            family=family,
            ratio=_bounded(float(state["ratio"])),
            prior=prior,
            samples=int(state["samples"]),
            assemblies=tuple(state["assemblies"]),
        )
    return Tokenizer(family=family, ratio=prior, prior=prior)


@dataclass(frozen=True)
class Observation:
    """One report's effect: the tokenizer after it, the ratio it observed (unclamped) and its
    drift from the ratio before it (|observed / previous - 1|)."""

    tokenizer: Tokenizer
    observed: float
    drift: float


def calibrate(
    tokenizer: Tokenizer, *, assembly_id: str, input_tokens: int, assembled_tokens: int
) -> Observation | None:
    """`tokenizer` after a usage report of `input_tokens` for an assembly of `assembled_tokens`
    exact tokens; None when the report cannot calibrate it (an exact session, a count of zero,
    an assembly already counted)."""
    if (
        tokenizer.exact
        or input_tokens <= 0
        or assembled_tokens <= 0
        or assembly_id in tokenizer.assemblies
    ):
        return None
    observed = input_tokens / assembled_tokens
    sample = _bounded(observed)
    previous = tokenizer.ratio
    ratio = sample if not tokenizer.is_calibrated else previous + SMOOTHING * (sample - previous)
    updated = replace(
        tokenizer,
        ratio=round(ratio, _DIGITS),
        samples=tokenizer.samples + 1,
        assemblies=(*tokenizer.assemblies, assembly_id)[-REMEMBERED_ASSEMBLIES:],
    )
    return Observation(tokenizer=updated, observed=observed, drift=abs(observed / previous - 1))


@dataclass(frozen=True)
class SessionWindow:
    """A session's one window: `usable` provider tokens (its context window less the output
    reserve), the watermarks compaction works between, and the tokenizer that converts."""

    usable: int
    watermarks: Watermarks
    tokenizer: Tokenizer

    @property
    def tokens(self) -> int:
        """The usable window in the session's encoding: what assembly fits and advice weighs."""
        return self.tokenizer.encoding_tokens(self.usable)

    @property
    def cut_step(self) -> int:
        """Encoding tokens between the history's stable cut points, at the session's starting
        ratio (see the module docstring: calibration never moves a cut point)."""
        return max(1, int(HISTORY_CUT_STEP * self.usable / self.tokenizer.prior))
