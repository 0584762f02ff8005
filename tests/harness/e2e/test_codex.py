"""End to end: the real codex CLI fixes a bug through the proxy, driven by the oracle policy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_codex_oracle_episode_is_solved_merged_and_fully_scored(oracle_episode):
    summary = oracle_episode("codex", expect_aux=0)
    assert summary.harness == "codex"
