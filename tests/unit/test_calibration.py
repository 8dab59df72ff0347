"""Tokenizer families, default ratios and calibration from usage reports (the pure core)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.advice import Watermarks
from app.domain.calibration import (
    REMEMBERED_ASSEMBLIES,
    Observation,
    SessionWindow,
    Tokenizer,
    calibrate,
    family_of,
    session_tokenizer,
)
from app.tokens import model_encoding

CLAUDE = Tokenizer(family="anthropic", ratio=1.35, prior=1.35)


def _tokenizer(model: str | None, encoding: str = "o200k_base") -> Tokenizer:
    return session_tokenizer(model, encoding=encoding, state=None, model_encoding=model_encoding)


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
        Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True),
        Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True),
        Tokenizer(family="openai", ratio=1.1, prior=1.1),
        Tokenizer(family="openai", ratio=1.1, prior=1.1),
        CLAUDE,
        Tokenizer(family="google", ratio=1.2, prior=1.2),
        Tokenizer(family="other", ratio=1.25, prior=1.25),
        Tokenizer(family="other", ratio=1.0, prior=1.0),
    ]


def test_the_stored_state_is_read_back_within_the_bounds() -> None:
    stored = {"ratio": 1.4, "samples": 3, "assemblies": ["a1", "a2", "a3"]}
    tokenizer = session_tokenizer(
        "claude-haiku-4-5", encoding="o200k_base", state=stored, model_encoding=model_encoding
    )
    assert tokenizer == replace(CLAUDE, ratio=1.4, samples=3, assemblies=("a1", "a2", "a3"))
    assert tokenizer.state() == stored
    assert tokenizer.as_dict() == {
        "family": "anthropic",
        "ratio": 1.4,
        "calibrated": True,
        "samples": 3,
        "exact": False,
    }
    wild = session_tokenizer(
        "claude-haiku-4-5",
        encoding="o200k_base",
        state={"ratio": 9.0, "samples": 1, "assemblies": []},
        model_encoding=model_encoding,
    )
    assert wild.ratio == 2.5
    # An exact session ignores any stored state: its counts are the provider's.
    assert session_tokenizer(
        "gpt-4o", encoding="o200k_base", state=stored, model_encoding=model_encoding
    ) == Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True)


def test_the_first_report_replaces_the_default_and_later_ones_are_smoothed() -> None:
    first = calibrate(CLAUDE, assembly_id="a1", input_tokens=1500, assembled_tokens=1000)
    assert first == Observation(
        tokenizer=replace(CLAUDE, ratio=1.5, samples=1, assemblies=("a1",)),
        observed=1.5,
        drift=1.5 / 1.35 - 1,
    )
    second = calibrate(first.tokenizer, assembly_id="a2", input_tokens=2000, assembled_tokens=1000)
    assert second == Observation(
        tokenizer=replace(CLAUDE, ratio=1.65, samples=2, assemblies=("a1", "a2")),
        observed=2.0,
        drift=2.0 / 1.5 - 1,
    )


def test_repeated_observations_converge_on_the_observed_ratio() -> None:
    tokenizer = replace(CLAUDE, ratio=1.2, samples=1)
    ratios = []
    for n in range(12):
        observation = calibrate(
            tokenizer, assembly_id=f"a{n}", input_tokens=1600, assembled_tokens=1000
        )
        assert observation is not None
        tokenizer = observation.tokenizer
        ratios.append(tokenizer.ratio)
    assert ratios == sorted(ratios)
    assert ratios[0] == 1.32  # 1.2 + 0.3 × (1.6 − 1.2)
    assert abs(ratios[-1] - 1.6) < 0.01


def test_an_observation_is_clamped_to_the_bounds() -> None:
    high = calibrate(CLAUDE, assembly_id="a1", input_tokens=50_000, assembled_tokens=1000)
    low = calibrate(CLAUDE, assembly_id="a1", input_tokens=10, assembled_tokens=1000)
    assert high is not None
    assert low is not None
    assert (high.tokenizer.ratio, high.observed) == (2.5, 50.0)
    assert (low.tokenizer.ratio, low.observed) == (0.75, 0.01)
    smoothed = calibrate(high.tokenizer, assembly_id="a2", input_tokens=10, assembled_tokens=1000)
    assert smoothed is not None
    assert smoothed.tokenizer.ratio == pytest.approx(2.5 + 0.3 * (0.75 - 2.5))


def test_a_report_that_cannot_calibrate_changes_nothing() -> None:
    counted = replace(CLAUDE, ratio=1.5, samples=1, assemblies=("a1",))
    exact = Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True)
    assert [
        calibrate(counted, assembly_id="a1", input_tokens=3000, assembled_tokens=1000),
        calibrate(exact, assembly_id="a2", input_tokens=3000, assembled_tokens=1000),
        calibrate(counted, assembly_id="a2", input_tokens=0, assembled_tokens=1000),
        calibrate(counted, assembly_id="a2", input_tokens=3000, assembled_tokens=0),
    ] == [None, None, None, None]


def test_only_the_newest_assemblies_are_remembered() -> None:
    tokenizer = CLAUDE
    for n in range(REMEMBERED_ASSEMBLIES + 3):
        observation = calibrate(
            tokenizer, assembly_id=f"a{n}", input_tokens=1500, assembled_tokens=1000
        )
        assert observation is not None
        tokenizer = observation.tokenizer
    assert tokenizer.samples == REMEMBERED_ASSEMBLIES + 3
    assert tokenizer.assemblies == tuple(f"a{n}" for n in range(3, REMEMBERED_ASSEMBLIES + 3))


def test_estimates_round_up_and_windows_round_down() -> None:
    tokenizer = Tokenizer(family="openai", ratio=1.1, prior=1.1)
    assert [tokenizer.provider_tokens(n) for n in (0, 1, 100, 101)] == [0, 2, 110, 112]
    assert [tokenizer.encoding_tokens(n) for n in (0, 110, 111, 112_000)] == [1, 100, 100, 101_818]


def test_the_window_shrinks_with_the_ratio_but_its_cut_step_does_not() -> None:
    def window(tokenizer: Tokenizer) -> SessionWindow:
        return SessionWindow(usable=112_000, watermarks=Watermarks(), tokenizer=tokenizer)

    default, calibrated = window(CLAUDE), window(replace(CLAUDE, ratio=1.6, samples=4))
    assert (default.tokens, default.cut_step) == (82_962, 41_481)
    assert (calibrated.tokens, calibrated.cut_step) == (70_000, 41_481)
    exact = window(Tokenizer(family="openai", ratio=1.0, prior=1.0, exact=True))
    assert (exact.tokens, exact.cut_step) == (112_000, 56_000)
