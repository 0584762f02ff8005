"""Harness mixes: weighted, per-group, reproducible draws."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from openenv.errors import BadRequest
from openenv.train.mix import HarnessMix


def test_spec_strings_parse_to_weights():
    assert HarnessMix.of("pi=2, claude-code").weights == {"pi": 2.0, "claude-code": 1.0}
    assert HarnessMix.of({"pi": 1}).weights == {"pi": 1}


def test_a_bad_weight_names_the_part():
    with pytest.raises(BadRequest, match="pi=lots"):
        HarnessMix.of("pi=lots")


def test_negative_or_all_zero_weights_are_rejected():
    with pytest.raises(ValidationError):
        HarnessMix(weights={"pi": 0})
    with pytest.raises(ValidationError):
        HarnessMix(weights={"pi": -1, "codex": 2})


def test_draws_are_reproducible_and_follow_the_weights():
    mix = HarnessMix(weights={"pi": 3, "codex": 1, "never": 0}, seed=7)
    draws = [mix.draw(step, group) for step in range(200) for group in range(4)]
    assert draws == [HarnessMix(weights=mix.weights, seed=7).draw(s, g) for s in range(200) for g in range(4)]
    counts = Counter(draws)
    assert "never" not in counts
    assert 0.68 < counts["pi"] / len(draws) < 0.82
