"""End to end, for every harness in the catalogue: the real CLI fixes a bug through the capture proxy,
driven by the oracle policy (look, fix, answer), and the episode is what an RL trainer needs: reward 1,
one merged sequence, a logprob for every completion token, auxiliary requests tagged, nothing left running.

A harness added under envs/<name>/spec.yaml is picked up here with no new test file; one that is not
installed skips (and fails in CI, where OPENENV_REQUIRE_ALL=1) naming its install command.

Every run episodes one harness per dialect (EVERY_RUN); the others are the `extended` tier, which the
scheduled run adds (tests/extended.py). The Docker sandbox has its own episodes (sandbox/test_docker.py).
"""

from __future__ import annotations

import pytest

from openenv.harness.catalog import get_spec, harness_names

pytestmark = pytest.mark.slow

# Auxiliary requests each harness makes in this episode (tagged aux, kept out of the training row).
# opencode's and gptme's title generators run beside the first turns; every other harness makes none.
AUX_TURNS = {"opencode": 1, "gptme": 1}
# One harness per dialect, in every run: openai_chat, openai_responses, anthropic, gemini.
EVERY_RUN = ("pi", "codex", "claude-code", "gemini-cli")


@pytest.mark.parametrize(
    "name",
    [
        name if name in EVERY_RUN else pytest.param(name, marks=pytest.mark.extended)
        for name in harness_names()
    ],
)
def test_oracle_episode_is_solved_merged_and_fully_scored(name, oracle_episode):
    summary = oracle_episode(name, expect_aux=AUX_TURNS.get(name, 0))
    assert summary.harness == name


def test_every_expected_aux_count_names_a_harness():
    assert set(AUX_TURNS) <= set(harness_names())


def test_every_run_episodes_every_dialect():
    dialects = {get_spec(name).dialect for name in harness_names()}
    assert {get_spec(name).dialect for name in EVERY_RUN} == dialects
