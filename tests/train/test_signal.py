"""The signal sampler: GRPO's episodes go where the policy's groups of that kind of task have had signal."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from openenv.capture.trajectory import SequenceRow
from openenv.harness.tasks.model import Task
from openenv.testing.results import episode_result
from openenv.train.failures import GroupOutcome
from openenv.train.rollout import HarnessRollout, RolloutConfig
from openenv.train.signal import SignalSampler, SignalSamplerConfig


def _task(task_id: str, **metadata: str) -> Task:
    return Task(id=task_id, instruction=task_id, tests={"test.sh": "exit 0"}, metadata=metadata)


def _tasks() -> list[Task]:
    return [_task(f"{kind}-{i}", kind=kind) for kind in ("create", "append") for i in range(6)]


def _sampler(**settings: Any) -> SignalSampler:
    return SignalSampler(_tasks(), SignalSamplerConfig(key="kind", **settings))


def _kinds(sampler: SignalSampler, steps: int = 300) -> Counter[str]:
    return Counter(
        sampler.kind(sampler.choose(step, group).id) for step in range(steps) for group in range(4)
    )


def test_before_any_group_every_task_weighs_the_same() -> None:
    sampler = _sampler()
    assert sampler.weights() == {"append": 0.5, "create": 0.5}
    counts = _kinds(sampler)
    assert 0.45 < counts["create"] / sum(counts.values()) < 0.55


def test_kinds_whose_groups_were_flat_are_drawn_less_but_still_drawn() -> None:
    sampler = _sampler(floor=0.1)
    for i in range(8):
        sampler.observe(f"create-{i % 6}", [1.0, 1.0, 1.0, 1.0])  # all solved: no signal
        sampler.observe(f"append-{i % 6}", [0.0, 1.0, 0.0, 1.0])  # mixed: signal
    assert sampler.rate("create") == pytest.approx(1 / 10) and sampler.rate("append") == pytest.approx(9 / 10)
    counts = _kinds(sampler)
    share = counts["create"] / sum(counts.values())
    assert 0.05 < share < 0.16  # 0.1 / (0.1 + 0.9)


def test_the_floor_keeps_a_flat_kind_in_play_and_the_window_forgets() -> None:
    sampler = _sampler(floor=0.2, window=4)
    for _ in range(10):
        sampler.observe("create-0", [0.0, 0.0])
    assert sampler.weights()["create"] == 0.2  # its rate, 1/6, is below the floor
    for _ in range(4):
        sampler.observe("create-1", [0.0, 1.0])
    assert sampler.rate("create") == pytest.approx(5 / 6)  # only the last 4 groups count


def test_draws_are_reproducible_and_one_episode_groups_say_nothing() -> None:
    a, b = _sampler(seed=3), _sampler(seed=3)
    for sampler in (a, b):
        sampler.observe("append-0", [0.0, 1.0])
        sampler.observe("create-0", [1.0])  # a group of one cannot be flat or not
    assert [a.choose(s, g).id for s in range(50) for g in range(2)] == [
        b.choose(s, g).id for s in range(50) for g in range(2)
    ]
    assert a.rate("create") == 0.5 and a.rate("append") == pytest.approx(2 / 3)
    assert [_sampler(seed=4).choose(s, 0).id for s in range(50)] != [a.choose(s, 0).id for s in range(50)]


def test_a_task_without_the_key_is_a_kind_of_its_own() -> None:
    sampler = SignalSampler([_task("lone"), *_tasks()], SignalSamplerConfig(key="kind"))
    assert sampler.kind("lone") == "lone" and set(sampler.weights()) == {"lone", "create", "append"}
    with pytest.raises(ValueError, match="at least one task"):
        SignalSampler([])


def test_the_rollout_runs_the_samplers_task_and_shows_it_every_finished_group() -> None:
    """`HarnessRollout.plan` takes the sampler's task, not the trainer's draw; `to_batch` feeds the groups'
    rewards back (a masked group is not evidence) and logs each kind's weight."""
    sampler = _sampler()
    rollout = HarnessRollout(RolloutConfig(harness="pi"), sampler=sampler)
    logged: dict[str, float] = {}
    trainer = SimpleNamespace(
        num_generations=2,
        model=SimpleNamespace(training=True),
        state=SimpleNamespace(global_step=5),
        processing_class=None,
        loss_type="dapo",
        _log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    plans = rollout.plan(["create-0"] * 2 + ["append-3"] * 2, trainer)
    assert [p.task.id for p in plans] == [sampler.choose(5, 0).id, sampler.choose(5, 1).id]
    row = SequenceRow(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], env_mask=[1], turn_ids=["t"])
    flat = GroupOutcome([episode_result([row], reward=1.0), episode_result([row], reward=1.0)], [1, 1])
    masked = GroupOutcome([episode_result([row], reward=0.0), episode_result([], reward=1.0)], [1, 1])
    batch = rollout.to_batch(plans, [flat, masked], trainer)
    assert len(batch["prompt_ids"]) == 4
    first = sampler.kind(plans[0].task.id)
    assert sampler.rate(first) == pytest.approx(1 / 3)  # one flat group seen, the masked one ignored
    assert logged[f"sampler/{first}/weight"] == pytest.approx(1 / 3)
    assert logged["rollout/zero_signal_groups"] == 1.0
