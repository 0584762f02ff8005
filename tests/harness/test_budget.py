"""Budgets with a real harness: pi is told to stop after N model turns and exits cleanly; the episode
ends with status `budget` after exactly N turns, and what it did until then is graded and trained."""

from __future__ import annotations

import pytest

from openenv.capture.budget import Budget
from openenv.harness.catalog import get_spec
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.install import install_status
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2])
def test_a_budget_of_n_turns_ends_a_pi_episode_with_status_budget_after_n_turns(
    capture_server, n: int, no_leftover_processes
):
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    # the oracle lists the workspace, edits, then would say it is done: 3 turns unbudgeted
    env = HarnessEnvironment(
        "pi", server=capture_server, settings=EpisodeSettings(budget=Budget(max_turns=n))
    )
    try:
        task = builtin_task("fix-temperature-conversion")
        obs, summary = run_episode(env, task, policy="oracle", look_first=True)
        records = env.trajectory()
    finally:
        env.close()
    assert summary.status == "budget" and summary.budget_hit == f"max_turns={n}"
    assert obs.harness_status == "exited", "the harness took the final reply and exited by itself"
    assert summary.turns == n
    stopped = [r for r in records if r.budget]
    assert len(stopped) == 1 and stopped[0].index == max(r.index for r in records), "answered last, once"
    assert summary.tokens_trained == summary.tokens_sampled > 0
    if n == 2:  # the edit happened before the cap: the work is graded as it stands
        assert summary.reward == 1.0
