"""End to end: the real opencode CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_opencode_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    # opencode's title generator runs beside the first turn and must be tagged aux.
    summary = oracle_episode("opencode", expect_aux=1)
    assert summary.harness == "opencode"
