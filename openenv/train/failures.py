"""The failure policy of a GRPO group: retry failed episodes in a fresh sandbox, else mask the group.

An episode in status `error` (openenv/harness/outcome.py: the engine, proxy, sandbox or verifier failed,
so it has no reward) is a failed episode: it is never trained as a 0. The `rollout/error_episodes` metric
counts such attempts, retried ones included.

A failed episode (see `episode.py`) is rerun from scratch, in a new environment, up to `max_retries`
times. When a slot of the group is still failed after that, the whole group is masked: its rows get
`env_mask` all zeros (no token is trained) and every reward function returns None for them, which
TRL treats as unscorable (advantage 0, excluded from the group baselines). A training step never
fails because an episode did.

An episode its budget ended (status `budget`: the proxy told the harness to stop after N turns or
tokens) is the policy's outcome by default (`on_budget="train"`): it is graded and trained like any
other, so a policy that loops learns from the reward it got. `on_budget="retry"` treats it as a
failure instead (retried, then the group masked), for runs whose budget is an infrastructure limit.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from openenv.train.episode import TrainingEpisodeResult

__all__ = ["FailurePolicy", "GroupOutcome", "Submitter", "run_group"]


class Submitter(Protocol):
    """Runs one episode somewhere and returns the future of its `TrainingEpisodeResult`."""

    def submit(self, episode: Any, /) -> Future[TrainingEpisodeResult]: ...


class FailurePolicy(BaseModel):
    """How many times a failed episode is retried before its group is masked, and whether an episode
    that hit its budget trains (`train`) or counts as failed (`retry`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_retries: int = Field(default=2, ge=0)
    on_budget: Literal["train", "retry"] = "train"


@dataclass
class GroupOutcome:
    """The final attempt of each slot, how many attempts each took, whether the group is masked, and how
    many attempts (retried ones included) ended in status `error` (our side failed: no reward to learn)."""

    results: list[TrainingEpisodeResult]
    attempts: list[int]
    errored: int = 0

    @property
    def masked(self) -> bool:
        return any(r.failed for r in self.results)

    @property
    def retries(self) -> int:
        return sum(a - 1 for a in self.attempts)


def run_group(pool: Submitter, episodes: Sequence[Any], policy: FailurePolicy) -> Future[GroupOutcome]:
    """Start every episode of a group on `pool`; retries are resubmitted as failures come in.

    `pool` is an executor (`openenv.executor`: thread or Ray) and `episodes` its jobs, or a
    `ThreadPoolExecutor` and callables; either way `pool.submit(episode)` returns a future result.

    Returns a future of the group's outcome; it never raises for a failed episode.
    """
    done: Future[GroupOutcome] = Future()
    results: list[TrainingEpisodeResult | None] = [None] * len(episodes)
    attempts = [0] * len(episodes)
    errored = [0]
    lock = threading.Lock()

    def start(slot: int) -> None:
        attempts[slot] += 1
        pool.submit(episodes[slot]).add_done_callback(lambda f: finish(slot, f))

    def finish(slot: int, future: Future[TrainingEpisodeResult]) -> None:
        result = future.result()  # run_training_episode (and a lost worker) give a failed result, never raise
        if result.status == "error":
            with lock:
                errored[0] += 1
        if result.status == "budget" and policy.on_budget == "retry" and result.error is None:
            result.error = "budget: the episode hit its budget and the failure policy retries such episodes"
        if result.failed and attempts[slot] <= policy.max_retries:
            start(slot)
            return
        with lock:
            results[slot] = result
            complete = all(r is not None for r in results) and not done.done()
        if complete:
            done.set_result(
                GroupOutcome(
                    results=[r for r in results if r is not None], attempts=attempts, errored=errored[0]
                )
            )

    for slot in range(len(episodes)):
        start(slot)
    return done
