"""Spend episodes where the policy's groups have signal: a task sampler for GRPO.

A GRPO group whose episodes all get the same reward has advantage zero for every row: its episodes cost
as much as any other and teach nothing (`rollout/zero_signal_groups` counts them; the reference's pilot
found 80% of its groups so). Which tasks are flat changes as the policy learns, and a task is rarely
drawn twice in a run, so the sampler learns about *kinds* of task, not instances: tasks of one kind (a
metadata field, `category` by default; fileops tasks have `kind`) tend to be solved or failed together.

The rule, per group of a training step:
1. Each kind's **signal rate** is (groups with unequal rewards + 1) / (groups + 2) over its last `window`
   groups: a Laplace estimate, so a kind never tried counts 0.5 and one flat group does not condemn it.
2. Each task of the pool weighs its kind's rate, raised to `floor` when lower (a kind that went flat is
   still revisited now and then: the policy moves, and its signal may come back).
3. The group's task is drawn with probability proportional to that weight, from a generator seeded by
   `(seed, step, group)`, so a rerun of the same run draws the same tasks given the same rewards.

Why not DAPO's dynamic sampling (sample, drop flat groups, sample more until the batch is full): it
pays the episodes of the flat groups to find out they were flat, and on two CPU cores the episodes are
the cost. This sampler pays only for the groups it runs, and trusts kinds to predict instances; where
they do not (one kind, or kinds that say nothing of difficulty) every weight stays near equal and it
draws as the uniform sampler does.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from openenv.harness.tasks.model import Task

__all__ = ["SignalSampler", "SignalSamplerConfig"]


class SignalSamplerConfig(BaseModel):
    """The sampler's settings (see the module doc for the rule)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(
        default="category",
        description="the task metadata field that names its kind (a task without it is a kind of its own)",
    )
    window: int = Field(default=8, gt=0, description="a kind's rate counts its last this many groups")
    floor: float = Field(default=0.1, gt=0, le=1, description="the least weight a task keeps")
    seed: int = 0


class SignalSampler:
    """Draws each GRPO group's task from `tasks`, weighted by its kind's recent signal rate."""

    def __init__(self, tasks: Iterable[Task], config: SignalSamplerConfig | None = None) -> None:
        self.config = config or SignalSamplerConfig()
        self.tasks = sorted(tasks, key=lambda t: t.id)
        if not self.tasks:
            raise ValueError("SignalSampler needs at least one task")
        self._kind = {t.id: t.metadata.get(self.config.key, t.id) for t in self.tasks}
        self._history: dict[str, deque[bool]] = defaultdict(lambda: deque(maxlen=self.config.window))

    def kind(self, task_id: str) -> str:
        return self._kind.get(task_id, task_id)

    def rate(self, kind: str) -> float:
        """The kind's signal rate (Laplace over its last `window` groups)."""
        seen = self._history.get(kind, ())
        return (sum(seen) + 1) / (len(seen) + 2)

    def weights(self) -> dict[str, float]:
        """Each kind's weight now (its rate, at least `floor`)."""
        return {kind: max(self.rate(kind), self.config.floor) for kind in sorted(set(self._kind.values()))}

    def choose(self, step: int, group: int) -> Task:
        """The task for group `group` of training step `step`."""
        weights = self.weights()
        rng = random.Random(f"{self.config.seed}:{step}:{group}")
        return rng.choices(self.tasks, weights=[weights[self._kind[t.id]] for t in self.tasks])[0]

    def observe(self, task_id: str, rewards: Sequence[float]) -> None:
        """Record one finished group: whether its rewards differed."""
        if len(rewards) > 1:
            self._history[self.kind(task_id)].append(len(set(rewards)) > 1)
