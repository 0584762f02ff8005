"""The async rollout worker: groups prefetched while the trainer steps, used only while fresh enough."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

from openenv.capture.trajectory import SequenceRow
from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import GroupOutcome
from openenv.train.rollout import GroupPlan, HarnessRollout, RolloutConfig
from openenv.train.sequences import TrainedRows
from openenv.train.worker import AsyncRolloutWorker


class RecordingRollout(HarnessRollout):
    """A rollout whose groups finish at once, tagged with the step they were started at."""

    def __init__(self) -> None:
        super().__init__(RolloutConfig(harness="pi", max_concurrency=1))
        self.started: list[int] = []
        self.step = 0

    def start_group(self, plan: GroupPlan, trainer) -> Future[GroupOutcome]:
        self.started.append(trainer.state.global_step)
        row = SequenceRow(
            prompt_ids=[1],
            completion_ids=[2],
            logprobs=[-1.0],
            env_mask=[1],
            turn_ids=[f"started@{trainer.state.global_step}"],
        )
        result = TrainingEpisodeResult(
            harness=plan.harness, task_id=plan.task.id, policy="sample", trained=TrainedRows(row)
        )
        future: Future[GroupOutcome] = Future()
        future.set_result(GroupOutcome([result] * plan.size, attempts=[1] * plan.size))
        return future


def _trainer(step: int, logged: dict[str, float]) -> SimpleNamespace:
    return SimpleNamespace(
        state=SimpleNamespace(global_step=step),
        num_generations=2,
        num_generations_eval=2,
        model=SimpleNamespace(training=True),
        processing_class=None,
        _log_metric=lambda name, value: logged.__setitem__(name, value),
    )


def test_a_group_is_prefetched_for_the_next_step_and_used_when_fresh():
    rollout = RecordingRollout()
    worker = AsyncRolloutWorker(rollout, max_staleness=1)
    prompts = ["fix-binary-search"] * 2
    logged: dict[str, float] = {}
    worker(prompts, _trainer(0, logged))
    assert rollout.started == [0, 0]  # one for now, one in flight for the next step
    worker(prompts, _trainer(1, logged))
    assert rollout.started == [0, 0, 1]  # the step-0 prefetch was used; a new one is in flight
    assert logged["async/staleness"] == 1.0 and logged["async/prefetched_used"] == 1.0


def test_groups_staler_than_the_bound_are_dropped_and_rerun():
    rollout = RecordingRollout()
    worker = AsyncRolloutWorker(rollout, max_staleness=1)
    prompts = ["fix-binary-search"] * 2
    logged: dict[str, float] = {}
    worker(prompts, _trainer(0, logged))
    batch = worker(prompts, _trainer(5, logged))
    assert logged["async/stale_dropped"] == 1.0 and logged["async/staleness"] == 0.0
    assert rollout.started == [0, 0, 5, 5]
    assert len(batch["completion_ids"]) == 2
    rollout.close()
