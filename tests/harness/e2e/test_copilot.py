"""End to end: the real copilot CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_copilot_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    summary = oracle_episode("copilot", expect_aux=0)
    assert summary.harness == "copilot"
