"""End to end: the real claude-code CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_claude_code_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    summary = oracle_episode("claude-code", expect_aux=0)
    assert summary.harness == "claude-code"
