"""Rollout metrics: per harness over trained episodes, plus the failure policy's counters."""

from __future__ import annotations

import pytest

from openenv.testing.results import episode_result
from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import GroupOutcome
from openenv.train.metrics import rollout_metrics
from openenv.train.sequences import TrainedRows


def _result(
    harness: str, reward: float, tool_calls: int, *, error: str | None = None
) -> TrainingEpisodeResult:
    from openenv.capture.trajectory import SequenceRow

    row = (
        None
        if error
        else SequenceRow(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], env_mask=[1], turn_ids=[])
    )
    if error:  # the episode never ended: no summary, no rows
        return TrainingEpisodeResult(harness=harness, task_id="t", policy="sample", error=error, wall_s=2.0)
    trained = TrainedRows(row, dropped=1 if harness == "codex" else 0, tokens_sampled=1, tokens_trained=1)
    return episode_result(
        [row],
        harness=harness,
        reward=reward,
        breakdown={"solved": reward},
        tool_calls=tool_calls,
        turns=tool_calls + 1,
        trained=trained,
        wall_s=2.0,
    )


def test_each_harness_gets_its_own_reward_and_tool_call_means():
    outcomes = [
        GroupOutcome([_result("pi", 1.0, 2), _result("pi", 0.0, 4)], attempts=[1, 1]),
        GroupOutcome([_result("codex", 1.0, 6), _result("codex", 1.0, 8)], attempts=[1, 2]),
    ]
    metrics = rollout_metrics(outcomes)
    assert metrics["harness/pi/reward"] == 0.5 and metrics["harness/pi/tool_calls"] == 3.0
    assert metrics["harness/codex/solved"] == 1.0 and metrics["harness/codex/tool_calls"] == 7.0
    assert metrics["rollout/retries"] == 1.0 and metrics["rollout/dropped_sequences"] == 2.0
    assert metrics["rollout/episode_wall_s"] == pytest.approx(2.0)


def test_masked_groups_are_counted_but_kept_out_of_the_harness_means():
    outcomes = [
        GroupOutcome(
            [_result("pi", 1.0, 2), _result("pi", 0.0, 0, error="SandboxLost: gone")], attempts=[1, 3]
        )
    ]
    metrics = rollout_metrics(outcomes)
    assert "harness/pi/reward" not in metrics
    assert metrics["rollout/masked_groups"] == 1.0 and metrics["rollout/failed_episodes"] == 1.0


def test_groups_whose_rewards_are_all_equal_are_counted_as_giving_no_signal():
    """All-solved and all-failed groups have zero GRPO advantage; masked and one-episode groups are not judged."""
    outcomes = [
        GroupOutcome([_result("pi", 1.0, 2), _result("pi", 1.0, 3)], attempts=[1, 1]),  # all solved
        GroupOutcome([_result("pi", 0.0, 2), _result("pi", 0.0, 1)], attempts=[1, 1]),  # all failed
        GroupOutcome([_result("pi", 1.0, 2), _result("pi", 0.0, 1)], attempts=[1, 1]),  # signal
        GroupOutcome([_result("codex", 0.5, 2), _result("codex", 0.25, 2)], attempts=[1, 1]),  # signal
        GroupOutcome(
            [_result("pi", 1.0, 2), _result("pi", 0.0, 0, error="SandboxLost")], attempts=[1, 3]
        ),  # masked
        GroupOutcome([_result("pi", 1.0, 2)], attempts=[1]),  # one episode: no group to compare within
    ]
    assert rollout_metrics(outcomes)["rollout/zero_signal_groups"] == 0.5
    assert rollout_metrics(outcomes[2:])["rollout/zero_signal_groups"] == 0.0
    assert rollout_metrics([])["rollout/zero_signal_groups"] == 0.0


def test_naive_rows_report_the_share_of_sampled_tokens_they_do_not_hold():
    """Only episodes run with naive rows carry `token_changes`; without them the metric is absent."""
    naive = [_result("pi", 1.0, 1), _result("pi", 0.0, 1)]
    naive[0].token_changes, naive[1].token_changes = (50, 1), (30, 3)
    assert rollout_metrics([GroupOutcome(naive, attempts=[1, 1])])["rollout/naive_changed"] == pytest.approx(
        4 / 80
    )
    assert "rollout/naive_changed" not in rollout_metrics(
        [GroupOutcome([_result("pi", 1.0, 1)], attempts=[1])]
    )
