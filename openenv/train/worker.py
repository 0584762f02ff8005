"""An async rollout worker: episodes stay in flight while the trainer steps, with bounded staleness.

TRL's `AsyncGRPOTrainer` does not run on CPU (`examples/probe_async_grpo.py`: it streams weights to
vLLM over NCCL, which needs CUDA). This worker gives the same overlap inside the plain `GRPOTrainer`:
when a group of prompt P is consumed, another group of P is started at once, so it runs while the
trainer computes the loss and steps. The next time P comes up, the prefetched group is used if it
started at most `max_staleness` optimizer steps ago; older ones are dropped (and counted). Prompts in
GRPO datasets recur (epochs, `num_iterations`, small task sets), which is what makes prefetching pay.

Staleness is measured in optimizer steps from the start of the group's episodes. The tokens are
trained as if on-policy: TRL corrects the mismatch only with `use_vllm`'s importance sampling, so keep
`max_staleness` small (1 = the classic one-step-off-policy overlap). With the `local` backend the
episodes read the live weights while the optimizer writes them; use it for CPU demos, vLLM for real runs.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from concurrent.futures import Future
from typing import Any

from openenv.train.failures import GroupOutcome
from openenv.train.rollout import GroupPlan, HarnessRollout

__all__ = ["AsyncRolloutWorker"]


class AsyncRolloutWorker:
    """A `rollout_func` that prefetches groups through a `HarnessRollout`.

    Args:
        rollout: runs the episodes (its pool bounds how many are in flight).
        max_staleness: the oldest prefetched group still used, in optimizer steps.
        prefetch: groups kept in flight per prompt.
    """

    def __init__(self, rollout: HarnessRollout, *, max_staleness: int = 1, prefetch: int = 1) -> None:
        if max_staleness < 0 or prefetch < 0:
            raise ValueError("max_staleness and prefetch must be >= 0")
        self.rollout = rollout
        self.max_staleness = max_staleness
        self.prefetch = prefetch
        self._buffer: dict[tuple[str, str], deque[tuple[int, Future[GroupOutcome]]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.stats = {"prefetched_used": 0, "stale_dropped": 0, "started_now": 0}
        self.__name__ = "async_harness_rollout"

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        step = int(trainer.state.global_step)
        plans = self.rollout.plan(prompts, trainer)
        futures = [self._take(plan, step) or self._start(plan, trainer, now=True) for plan in plans]
        staleness = [step - version for version, _ in futures]
        for plan in plans:
            self._refill(plan, trainer, step)
        batch = self.rollout.to_batch(plans, [f.result() for _, f in futures], trainer)
        log = getattr(trainer, "_log_metric", None)
        if log is not None:
            log("async/staleness", sum(staleness) / len(staleness))
            for name, value in self.stats.items():
                log(f"async/{name}", float(value))
        return batch

    def close(self) -> None:
        """Wait out the groups still in flight, then close the rollout."""
        self.rollout.close()

    def _key(self, plan: GroupPlan) -> tuple[str, str]:
        return plan.prompt, plan.harness

    def _take(self, plan: GroupPlan, step: int) -> tuple[int, Future[GroupOutcome]] | None:
        """The oldest prefetched group of this prompt that is fresh enough; staler ones are dropped."""
        with self._lock:
            queue = self._buffer[self._key(plan)]
            while queue:
                version, future = queue.popleft()
                if step - version <= self.max_staleness:
                    self.stats["prefetched_used"] += 1
                    return version, future
                self.stats["stale_dropped"] += 1
        return None

    def _start(self, plan: GroupPlan, trainer: Any, *, now: bool = False) -> tuple[int, Future[GroupOutcome]]:
        if now:
            self.stats["started_now"] += 1
        return int(trainer.state.global_step), self.rollout.start_group(plan, trainer)

    def _refill(self, plan: GroupPlan, trainer: Any, step: int) -> None:
        with self._lock:
            queue = self._buffer[self._key(plan)]
            missing = self.prefetch - len(queue)
        for _ in range(max(missing, 0)):
            started = self._start(plan, trainer)
            with self._lock:
                self._buffer[self._key(plan)].append(started)
