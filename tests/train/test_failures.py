"""The group failure policy: retry failed episodes in a fresh attempt, else mask the whole group."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest

from openenv.capture.trajectory import SequenceRow
from openenv.testing.results import episode_result
from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import FailurePolicy, run_group
from openenv.train.sequences import TrainedRows

ROW = SequenceRow(prompt_ids=[1], completion_ids=[2], logprobs=[-0.1], env_mask=[1], turn_ids=["t"])


def _episode(outcomes: list[str]):
    """An episode whose successive attempts fail (`x`) or succeed (`ok`)."""
    attempts = itertools.count()

    def run() -> TrainingEpisodeResult:
        ok = outcomes[min(next(attempts), len(outcomes) - 1)] == "ok"
        return TrainingEpisodeResult(
            harness="pi",
            task_id="t",
            policy="sample",
            trained=TrainedRows(ROW if ok else None),
            error=None if ok else "SandboxLost: container vanished",
        )

    return run


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=2) as executor:
        yield executor


def test_a_failed_episode_is_retried_and_the_group_trains(pool):
    outcome = run_group(pool, [_episode(["ok"]), _episode(["x", "ok"])], FailurePolicy(max_retries=2)).result(
        10
    )
    assert outcome.attempts == [1, 2] and outcome.retries == 1
    assert not outcome.masked and all(not r.failed for r in outcome.results)


def test_when_retries_run_out_the_group_is_masked_not_raised(pool):
    outcome = run_group(pool, [_episode(["ok"]), _episode(["x"])], FailurePolicy(max_retries=1)).result(10)
    assert outcome.attempts == [1, 2]
    assert outcome.masked and outcome.results[1].error.startswith("SandboxLost")


def test_zero_retries_masks_on_the_first_failure(pool):
    outcome = run_group(pool, [_episode(["x", "ok"])], FailurePolicy(max_retries=0)).result(10)
    assert outcome.attempts == [1] and outcome.masked


def _budgeted() -> TrainingEpisodeResult:
    return episode_result([ROW], status="budget")


def test_an_episode_ended_by_its_budget_trains_by_default(pool):
    outcome = run_group(pool, [_budgeted, _episode(["ok"])], FailurePolicy()).result(10)
    assert outcome.attempts == [1, 1] and not outcome.masked


def test_the_failure_policy_can_retry_budget_episodes_then_mask_the_group(pool):
    outcome = run_group(
        pool, [_budgeted, _episode(["ok"])], FailurePolicy(max_retries=1, on_budget="retry")
    ).result(10)
    assert outcome.attempts == [2, 1] and outcome.masked
    assert outcome.results[0].error is not None and outcome.results[0].error.startswith("budget")
