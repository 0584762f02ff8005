"""`episode_result`: a finished training episode as `run_training_episode` returns one (a summary and its
rows), and `episode_summary`: the summary alone, for the tests of what consumes results (failure policy,
metrics, batches, trainers, reports, the CLI) without running an episode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openenv.capture.trajectory import SequenceRow
from openenv.harness.outcome import EpisodeStatus
from openenv.harness.summary import EpisodeSummary
from openenv.train.episode import EpisodePolicy, TrainingEpisodeResult
from openenv.train.sequences import SequencePolicy, TrainedRows, trained_rows

__all__ = ["episode_result", "episode_summary"]


def episode_summary(**fields: Any) -> EpisodeSummary:
    """A summary of one exited episode of pi on task `t` (reward 0, one turn, one sequence, no tool call),
    with `fields` replacing any of it."""
    defaults: dict[str, Any] = {
        "harness": "pi",
        "task": "t",
        "policy": "sample",
        "reward": 0.0,
        "status": "exited",
        "turns": 1,
        "tool_calls": 0,
        "sequences": 1,
        "merge_ratio": 1.0,
        "aux_turns": 0,
        "reward_breakdown": {},
        "wall_s": 0.0,
    }
    return EpisodeSummary(**{**defaults, **fields})


def episode_result(
    rows: Sequence[SequenceRow] = (),
    *,
    reward: float = 0.0,
    breakdown: dict[str, float] | None = None,
    status: EpisodeStatus = "exited",
    tool_calls: int = 0,
    turns: int = 0,
    harness: str = "pi",
    task_id: str = "t",
    policy: EpisodePolicy = "sample",
    sequences: SequencePolicy = "all",
    trained: TrainedRows | None = None,
    error: str | None = None,
    wall_s: float = 0.0,
) -> TrainingEpisodeResult:
    """A scored episode with `rows` (split by `sequences`, as `run_training_episode` splits them; or
    `trained` as given) and a summary holding the rest."""
    summary = episode_summary(
        harness=harness,
        task=task_id,
        policy=policy,
        reward=reward,
        status=status,
        turns=turns,
        tool_calls=tool_calls,
        sequences=len(rows),
        reward_breakdown=breakdown or {},
        wall_s=wall_s,
    )
    split = trained or trained_rows(rows, sequences, sampled=sum(sum(r.env_mask) for r in rows))
    return TrainingEpisodeResult(
        harness=harness,
        task_id=task_id,
        policy=policy,
        summary=summary,
        trained=split,
        error=error,
        wall_s=wall_s,
    )
