"""A training episode as an executor job: what travels to where the episode runs, and nothing more.

The driver (`HarnessRollout`) plans groups, draws harnesses from the mix and applies the failure policy;
a `TrainingEpisodeJob` carries one episode's harness, task, policy and sampling to a thread here or to
an `EpisodeWorker` on another node (`openenv.executor`), and `run_training_episode` runs it there against
that place's capture server. On both executors the same function runs the episode, so the rows match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from openenv.capture.server import CaptureServer
from openenv.executor.base import EngineSpec, WorkerContext
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.episode_settings import EpisodeSettings
from openenv.harness.tasks.model import Task
from openenv.train.episode import EpisodePolicy, RowTokens, TrainingEpisodeResult, run_training_episode
from openenv.train.sequences import SequencePolicy

__all__ = ["EnvBuilder", "TrainingEpisodeJob"]

# Builds a fresh environment for (harness name, capture server); must pickle to run on Ray.
EnvBuilder = Callable[[str, CaptureServer | None], HarnessEnvironment]


@dataclass(frozen=True)
class TrainingEpisodeJob:
    """One attempt at one episode of a group.

    Args:
        harness, task, policy: what to run.
        engine: the engine the episode samples from (a Ray worker serves it with its own proxy).
        settings: how the episode runs (sandbox, network, sampling, timeouts, budget).
        sequences: which of the episode's sequences train (`sequences.py`).
        env_builder: a custom environment builder (default: `HarnessEnvironment` with the above).
        tokens: `exact` rows, or `naive` ones (the control of `openenv.train.naive`).
    """

    harness: str
    task: Task
    policy: EpisodePolicy
    engine: EngineSpec
    settings: EpisodeSettings = field(default_factory=EpisodeSettings)
    sequences: SequencePolicy = "all"
    env_builder: EnvBuilder | None = None
    tokens: RowTokens = "exact"

    @property
    def label(self) -> str:
        return f"{self.harness}/{self.task.id}/{self.policy}"

    def run(self, context: WorkerContext) -> TrainingEpisodeResult:
        try:
            server = context.capture(self.engine)
        except Exception as exc:
            return self.lost(f"{type(exc).__name__}: {exc}")
        build = self.env_builder or self._default_env
        result = run_training_episode(
            lambda harness: build(harness, server),
            self.harness,
            self.task,
            policy=self.policy,
            timeout_s=self.settings.timeout_s,
            sequences=self.sequences,
            keep_in=context.artifacts,
            tokens=self.tokens,
        )
        result.node = context.node_id
        return result

    def lost(self, reason: str) -> TrainingEpisodeResult:
        return TrainingEpisodeResult(
            harness=self.harness, task_id=self.task.id, policy=self.policy, error=reason
        )

    def _default_env(self, harness: str, server: CaptureServer | None) -> HarnessEnvironment:
        return HarnessEnvironment(harness, server=server, engine=self.engine, settings=self.settings)
