"""One training episode: a harness on a task, start to end, reduced to what GRPO needs.

A failure is an episode that produced nothing to learn from for reasons outside the policy: it ended
in status `error` (the engine, proxy, sandbox or verifier failed; openenv/harness/outcome.py), the
environment raised, the harness crashed, or no model turn was recorded. A harness that exits non-zero after the model's replies is *not* a failure: that is
the policy's outcome, and it gets the verifier's reward like any other.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from openenv.capture.trajectory import SequenceRow
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.rollout import run_episode, save_trajectory
from openenv.harness.tasks.model import Task
from openenv.train.sequences import SequencePolicy, TrainedRows, trained_rows

__all__ = ["EnvFactory", "EpisodePolicy", "TrainingEpisodeResult", "run_training_episode"]

EpisodePolicy = Literal["sample", "oracle"]
# Builds a fresh environment for a harness name; each attempt gets its own (fresh sandbox, session).
EnvFactory = Callable[[str], HarnessEnvironment]


@dataclass
class TrainingEpisodeResult:
    """What one attempt at an episode left behind."""

    harness: str
    task_id: str
    policy: EpisodePolicy
    row: SequenceRow | None = None
    branches: tuple[SequenceRow, ...] = ()
    reward: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)
    tool_calls: int = 0
    turns: int = 0
    status: str | None = None
    dropped_sequences: int = 0
    tokens_sampled: int = 0
    tokens_trained: int = 0
    aux_tokens: int = 0
    malformed_tool_calls: int = 0
    error: str | None = None
    wall_s: float = 0.0
    node: str | None = None  # where it ran: a Ray node id, or None for this process
    trajectory: str | None = None  # the full trajectory (JSONL) on that node, when one was kept

    @property
    def rows(self) -> tuple[SequenceRow, ...]:
        """Every row that trains: the primary row, then the branches."""
        return (self.row, *self.branches) if self.row is not None else ()

    @property
    def trained_ratio(self) -> float:
        """tokens_trained / tokens_sampled (policy tokens; aux turns are counted apart in `aux_tokens`)."""
        return self.tokens_trained / self.tokens_sampled if self.tokens_sampled else 1.0

    def take(self, rows: TrainedRows) -> None:
        """Keep the rows that train and their token counts."""
        self.row, self.branches, self.dropped_sequences = rows.primary, rows.branches, rows.dropped
        self.tokens_sampled, self.tokens_trained = rows.tokens_sampled, rows.tokens_trained

    @property
    def failed(self) -> bool:
        return self.error is not None or self.status == "crashed" or self.row is None


def run_training_episode(make_env: EnvFactory, harness: str, task: Task, *, policy: EpisodePolicy = "sample",
                         timeout_s: float | None = None, sequences: SequencePolicy = "all",
                         keep_in: Path | None = None) -> TrainingEpisodeResult:
    """Run one episode in a fresh environment; exceptions become a failed result, never escape.

    `sample`: the backend samples every turn (on-policy). `oracle`: the task's reference solution is sent
    through the harness's tools and the backend scores it (an expert episode with the policy's own
    logprobs, useful to seed a group with a success). `sequences` says which of the episode's
    sequences train (`sequences.py`). `keep_in`: also write the full trajectory (every turn, aux
    included) there as JSONL, and name it in `result.trajectory`.
    """
    start = time.monotonic()
    result = TrainingEpisodeResult(harness=harness, task_id=task.id, policy=policy)
    env = None
    try:
        env = make_env(harness)
        obs, summary = run_episode(env, task, policy=policy, timeout_s=timeout_s)
        stats = obs.stats
        result.take(trained_rows(obs.sequences or [], sequences, sampled=stats.sampled_tokens if stats else None))
        result.aux_tokens = stats.aux_tokens if stats else 0
        result.malformed_tool_calls = stats.malformed_tool_calls if stats else 0
        result.reward, result.breakdown = summary.reward or 0.0, dict(summary.reward_breakdown)
        if summary.status == "error":  # our side failed: not a score of 0; the failure policy retries or masks it
            result.error = f"error: {summary.error}"
        elif summary.reward is None:
            result.error = f"no reward ({summary.reward_status}): {summary.no_reward_reason}"
        result.tool_calls, result.turns, result.status = summary.tool_calls, summary.turns, summary.status
        if keep_in is not None:
            name = f"{harness}-{task.id}-{uuid.uuid4().hex[:8]}.jsonl"
            result.trajectory = str(save_trajectory(keep_in / name, env, obs, summary))
    except Exception as exc:  # noqa: BLE001 - a failed episode is data for the failure policy, not a crash
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if env is not None:
            env.close()
    result.wall_s = time.monotonic() - start
    return result
