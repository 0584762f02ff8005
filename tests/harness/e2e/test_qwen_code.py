"""End to end: the real qwen-code CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_qwen_code_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    summary = oracle_episode("qwen-code", expect_aux=0)
    assert summary.harness == "qwen-code"
