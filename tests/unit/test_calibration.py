"""Tokenizer families, default ratios and the affine calibration of provider tokens from usage
reports (the pure core)."""

from __future__ import annotations

import math
from dataclasses import astuple, replace

import pytest

from app.domain.advice import Watermarks
from app.domain.calibration import (
    DECAY,
    REMEMBERED_ASSEMBLIES,
    Moments,
    Observation,
    SessionWindow,
    Tokenizer,
    calibrate,
    family_of,
    session_tokenizer,
)
from app.tokens import model_encoding

CLAUDE = Tokenizer(family="anthropic", ratio=1.35, prior=1.35)
EXACT = Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True)
# A 128,000-token window less the default 16,000-token output reserve: overheads up to 56,000.
USABLE = 112_000


def _tokenizer(model: str | None, encoding: str = "o200k_base") -> Tokenizer:
    return session_tokenizer(
        model, encoding=encoding, state=None, model_encoding=model_encoding, usable=USABLE
    )


def _stored(model: str, state: dict[str, object]) -> Tokenizer:
    return session_tokenizer(
        model, encoding="o200k_base", state=state, model_encoding=model_encoding, usable=USABLE
    )


def _report(tokenizer: Tokenizer, assembly_id: str, *, x: int, y: int) -> Observation:
    """`tokenizer` after the provider counted `y` input tokens for an assembly of `x`."""
    observation = calibrate(
        tokenizer, assembly_id=assembly_id, input_tokens=y, assembled_tokens=x, usable=USABLE
    )
    assert observation is not None
    return observation


def _fitted(tokenizer: Tokenizer, reports: list[tuple[int, int]]) -> list[tuple[float, int]]:
    """The (ratio, overhead) after each of `reports`, (x, y) each, one assembly apiece."""
    fitted = []
    for n, (x, y) in enumerate(reports):
        tokenizer = _report(tokenizer, f"a{n}", x=x, y=y).tokenizer
        fitted.append((tokenizer.ratio, tokenizer.overhead))
    return fitted


def _window(tokenizer: Tokenizer) -> SessionWindow:
    return SessionWindow(usable=USABLE, watermarks=Watermarks(), tokenizer=tokenizer)


def test_family_of_reads_the_model_label() -> None:
    models = [
        None,
        "",
        "claude-sonnet-4-5",
        "Claude-3-Opus",
        "anthropic.claude-3-haiku-20240307-v1:0",
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
        "anthropic.future-model",
        "gemini-2.5-pro",
        "models/gemini-1.5-flash",
        "gemma-2-9b-it",
        "gpt-4o",
        "gpt-4o-2024-08-06",
        "o3-mini",
        "gpt-4",
        "openai/gpt-4.1",
        "ft:gpt-4o-mini-2024-07-18:acme::abc123",
        "gpt-test",
        "llama-3.1-70b-instruct",
        "deepseek-chat",
    ]
    assert {m: family_of(m, model_encoding=model_encoding) for m in models} == {
        None: "other",
        "": "other",
        "claude-sonnet-4-5": "anthropic",
        "Claude-3-Opus": "anthropic",
        "anthropic.claude-3-haiku-20240307-v1:0": "anthropic",
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0": "anthropic",
        "anthropic.future-model": "anthropic",
        "gemini-2.5-pro": "google",
        "models/gemini-1.5-flash": "google",
        "gemma-2-9b-it": "google",
        "gpt-4o": "openai",
        "gpt-4o-2024-08-06": "openai",
        "o3-mini": "openai",
        "gpt-4": "openai",
        "openai/gpt-4.1": "openai",
        "ft:gpt-4o-mini-2024-07-18:acme::abc123": "openai",
        "gpt-test": "other",
        "llama-3.1-70b-instruct": "other",
        "deepseek-chat": "other",
    }


def test_an_openai_model_in_its_own_encoding_is_exact_and_others_start_from_defaults() -> None:
    assert [
        _tokenizer("gpt-4o"),
        _tokenizer("gpt-4", encoding="cl100k_base"),
        _tokenizer("gpt-4"),
        _tokenizer("gpt-4o", encoding="cl100k_base"),
        _tokenizer("claude-opus-4-1"),
        _tokenizer("gemini-2.5-flash"),
        _tokenizer("mistral-large"),
        _tokenizer(None),
    ] == [
        EXACT,
        EXACT,
        Tokenizer(family="openai", ratio=1.1, prior=1.1),
        Tokenizer(family="openai", ratio=1.1, prior=1.1),
        CLAUDE,
        Tokenizer(family="google", ratio=1.2, prior=1.2),
        Tokenizer(family="other", ratio=1.25, prior=1.25),
        Tokenizer(family="other", ratio=1.0, prior=1.0),
    ]


def test_noiseless_reports_of_a_growing_history_recover_overhead_and_ratio_exactly() -> None:
    # The provider counts 15,000 tokens of tools and framing, then 1.3 per exact token.
    reports = [(x, 15_000 + x * 13 // 10) for x in range(2000, 30_000, 2500)]
    fitted = _fitted(CLAUDE, reports)
    # One report identifies no slope: the default ratio stands and the rest is overhead.
    assert fitted[0] == (1.35, 17_600 - 2700)
    # A second, 2,500 tokens larger, spreads the sizes enough: the line is exact from then on.
    assert fitted[1:] == [(1.3, 15_000)] * (len(reports) - 1)


def test_a_small_first_report_with_a_large_overhead_does_not_collapse_the_window() -> None:
    # 2,000 tokens assembled beside 15,000 of tool definitions: the ratio-only model observed
    # 8.5, bounded it to 2.5 and fitted 44,800 tokens in a window that holds 72,370.
    observation = _report(CLAUDE, "a1", x=2000, y=17_000)
    assert (observation.tokenizer.ratio, observation.tokenizer.overhead) == (1.35, 14_300)
    assert _window(observation.tokenizer).tokens == 72_370 == math.floor((USABLE - 14_300) / 1.35)
    assert observation.tokenizer.provider_tokens(2000) == 17_000


def test_reports_below_the_ratio_lower_it_rather_than_the_overhead() -> None:
    # An OpenAI model in the other encoding counts 5% less than the default 1.1 assumed.
    gpt4 = _tokenizer("gpt-4")
    assert _fitted(gpt4, [(1000, 1050)]) == [(1.05, 0)]
    # Two reports of one size: still no slope, both 1.05 a token.
    assert _fitted(gpt4, [(1000, 1050), (1000, 1050)]) == [(1.05, 0), (1.05, 0)]


def test_without_spread_the_last_identified_ratio_stays_and_the_overhead_follows() -> None:
    # Identified on a growing history; then the history stops growing (compaction holds it at
    # one size) until its sizes no longer identify a slope, and the tools grow by 1,000 tokens:
    # the ratio stays, the overhead moves, all the way once the older reports' weight decays.
    growing = [(x, 15_000 + x * 13 // 10) for x in range(10_000, 60_000, 10_000)]
    steady = [(60_000, 15_000 + 78_000)] * 30
    more_tools = [(60_000, 16_000 + 78_000)] * 80
    tokenizer = CLAUDE
    for n, (x, y) in enumerate(growing + steady):
        tokenizer = _report(tokenizer, f"a{n}", x=x, y=y).tokenizer
    assert (tokenizer.ratio, tokenizer.overhead, tokenizer.moments.is_spread) == (
        1.3,
        15_000,
        False,
    )
    fitted = _fitted(tokenizer, more_tools)
    assert {ratio for ratio, _ in fitted} == {1.3}
    assert [overhead for _, overhead in fitted] == sorted(overhead for _, overhead in fitted)
    assert fitted[-1] == (1.3, 16_000)


def test_the_fit_is_bounded() -> None:
    # Three provider tokens a token: the slope is held at 2.5 and the line still runs through
    # the reports' weighted centroid, an overhead of half their weighted mean size.
    assert _fitted(CLAUDE, [(1000, 3000), (2000, 6000), (3000, 9000)]) == [
        (1.35, 1650),
        (2.5, round(0.5 * (0.9 * 1000 + 2000) / 1.9)),
        (2.5, round(0.5 * (0.81 * 1000 + 0.9 * 2000 + 3000) / 2.71)),
    ]
    # A tenth of a token a token: 0.75 with no overhead, whatever the spread.
    assert _fitted(CLAUDE, [(1000, 100), (3000, 300)]) == [(0.75, 0), (0.75, 0)]
    # A report of 200,000 tokens in a 112,000-token window: the overhead stops at half the
    # window, and the window in the encoding at half what the ratio alone leaves.
    wild = _report(CLAUDE, "a1", x=2000, y=200_000).tokenizer
    assert (wild.ratio, wild.overhead) == (1.35, 56_000)
    assert _window(wild).tokens == 41_481 == _window(CLAUDE).tokens // 2


def test_the_moments_are_the_exponentially_weighted_ones() -> None:
    reports = [(1200, 16_900), (5300, 21_000), (2100, 18_400), (9800, 27_200), (4400, 20_100)]
    moments = Moments()
    for x, y in reports:
        moments = moments.add(x, y)
    # Computed directly: the newest report weighs 1, each older one DECAY times the next.
    weighted = [(DECAY ** (len(reports) - 1 - n), x, y) for n, (x, y) in enumerate(reports)]
    total = sum(w for w, _, _ in weighted)
    mean_x = sum(w * x for w, x, _ in weighted) / total
    mean_y = sum(w * y for w, _, y in weighted) / total
    expected = Moments(
        weight=total,
        mean_x=mean_x,
        mean_y=mean_y,
        var_x=sum(w * (x - mean_x) ** 2 for w, x, _ in weighted) / total,
        cov_xy=sum(w * (x - mean_x) * (y - mean_y) for w, x, y in weighted) / total,
    )
    assert astuple(moments) == pytest.approx(astuple(expected), rel=1e-12)


def test_a_slope_needs_spread_sizes() -> None:
    # Weighted standard deviations of 10% and 30% of the mean: only the second identifies.
    close, apart = (
        Moments(weight=2, mean_x=1000, var_x=100**2),
        Moments(weight=2, mean_x=1000, var_x=300**2),
    )
    assert (Moments().is_spread, close.is_spread, apart.is_spread) == (False, False, True)


def test_an_observation_is_the_prediction_before_it_and_its_drift() -> None:
    first = _report(CLAUDE, "a1", x=1000, y=1500)
    assert first == Observation(
        tokenizer=replace(
            CLAUDE,
            overhead=150,
            samples=1,
            assemblies=("a1",),
            moments=Moments(weight=1, mean_x=1000, mean_y=1500),
        ),
        predicted=1350,
        drift=150 / 1500,
    )
    # The line through (1000, 1500) and (3000, 4300): 100 + 1.4 a token.
    second = _report(first.tokenizer, "a2", x=3000, y=4300)
    assert (second.predicted, second.drift) == (150 + 4050, 100 / 4300)
    assert (second.tokenizer.ratio, second.tokenizer.overhead) == (1.4, 100)


def test_an_exact_session_keeps_ratio_1_and_fits_its_overhead() -> None:
    assert _fitted(EXACT, [(1000, 4000), (3000, 6000), (8000, 11_000)]) == [
        (1.0, 3000),
        (1.0, 3000),
        (1.0, 3000),
    ]
    # A provider counting fewer tokens than the exact ones cannot lower an exact ratio.
    assert _fitted(EXACT, [(1000, 900)]) == [(1.0, 0)]


def test_a_report_that_cannot_calibrate_changes_nothing() -> None:
    counted = _report(CLAUDE, "a1", x=1000, y=1500).tokenizer
    assert [
        calibrate(
            counted, assembly_id="a1", input_tokens=3000, assembled_tokens=1000, usable=USABLE
        ),
        calibrate(counted, assembly_id="a2", input_tokens=0, assembled_tokens=1000, usable=USABLE),
        calibrate(counted, assembly_id="a2", input_tokens=3000, assembled_tokens=0, usable=USABLE),
    ] == [None, None, None]


def test_only_the_newest_assemblies_are_remembered() -> None:
    tokenizer = CLAUDE
    for n in range(REMEMBERED_ASSEMBLIES + 3):
        tokenizer = _report(tokenizer, f"a{n}", x=1000, y=1500).tokenizer
    assert tokenizer.samples == REMEMBERED_ASSEMBLIES + 3
    assert tokenizer.assemblies == tuple(f"a{n}" for n in range(3, REMEMBERED_ASSEMBLIES + 3))


def test_the_stored_state_is_read_back_within_the_bounds() -> None:
    fitted = _report(_report(CLAUDE, "a1", x=2000, y=17_600).tokenizer, "a2", x=4500, y=20_850)
    state = fitted.tokenizer.state()
    assert _stored("claude-haiku-4-5", state) == fitted.tokenizer
    assert state == {
        "ratio": 1.3,
        "overhead": 15_000,
        "samples": 2,
        "assemblies": ["a1", "a2"],
        "moments": {
            "weight": fitted.tokenizer.moments.weight,
            "mean_x": fitted.tokenizer.moments.mean_x,
            "mean_y": fitted.tokenizer.moments.mean_y,
            "var_x": fitted.tokenizer.moments.var_x,
            "cov_xy": fitted.tokenizer.moments.cov_xy,
        },
    }
    assert fitted.tokenizer.as_dict() == {
        "family": "anthropic",
        "ratio": 1.3,
        "overhead_tokens": 15_000,
        "calibrated": True,
        "samples": 2,
        "exact": False,
    }
    wild = _stored("claude-haiku-4-5", {**state, "ratio": 9.0, "overhead": 90_000})
    negative = _stored("claude-haiku-4-5", {**state, "ratio": 0.1, "overhead": -5})
    assert [(wild.ratio, wild.overhead), (negative.ratio, negative.overhead)] == [
        (2.5, 56_000),
        (0.75, 0),
    ]
    # An exact session's ratio is 1 whatever was stored; its overhead is read like any other.
    assert _stored("gpt-4o", state) == replace(
        fitted.tokenizer, family="openai", ratio=1.0, prior=1.0, exact=True
    )


def test_a_ratio_only_state_reads_as_no_overhead_and_the_fit_continues_from_it() -> None:
    old = _stored("claude-haiku-4-5", {"ratio": 1.5, "samples": 3, "assemblies": ["a1", "a2"]})
    assert old == replace(CLAUDE, ratio=1.5, samples=3, assemblies=("a1", "a2"))
    # Its ratio stands in for the default: above it is overhead, below it a lower ratio.
    assert _fitted(old, [(1000, 1700)]) == [(1.5, 200)]
    assert _fitted(old, [(1000, 1400)]) == [(1.4, 0)]
    assert (
        calibrate(old, assembly_id="a2", input_tokens=1700, assembled_tokens=1000, usable=USABLE)
        is None
    )


def test_estimates_round_up_and_windows_round_down() -> None:
    tokenizer = Tokenizer(family="openai", ratio=1.1, prior=1.1)
    assert [tokenizer.provider_tokens(n) for n in (0, 1, 100, 101)] == [0, 2, 110, 112]
    assert [tokenizer.encoding_tokens(n) for n in (0, 110, 111, 112_000)] == [1, 100, 100, 101_818]
    # A whole request: the overhead, then the ratio's share of the assembled tokens.
    overhead = replace(tokenizer, overhead=5000)
    assert [overhead.provider_tokens(n) for n in (0, 1, 100)] == [5000, 5002, 5110]
    assert [overhead.encoding_tokens(n) for n in (4000, 5110, 112_000)] == [1, 100, 97_272]


def test_the_window_follows_ratio_and_overhead_but_its_cut_step_does_not() -> None:
    default = _window(CLAUDE)
    calibrated = _window(replace(CLAUDE, ratio=1.6, overhead=8000, samples=4))
    assert (default.tokens, default.cut_step) == (82_962, 41_481)
    assert (calibrated.tokens, calibrated.cut_step) == (65_000, 41_481)
    exact = _window(replace(EXACT, overhead=12_000, samples=2))
    assert (exact.tokens, exact.cut_step) == (100_000, 56_000)
