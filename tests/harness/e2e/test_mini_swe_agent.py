"""End to end: the real mini-swe-agent CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_mini_swe_agent_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    # mini-swe-agent needs a second tool call (its finish command) before it exits.
    summary = oracle_episode("mini-swe-agent", expect_aux=0)
    assert summary.harness == "mini-swe-agent"
