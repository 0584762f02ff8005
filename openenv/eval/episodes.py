"""One harness episode run in-process and saved as a complete episode log (requests included).

`openenv.harness.rollout.run_episode` drives the episode; this adds what the viewer and SFT export need
and a plain `run` trajectory lacks: every answered request's canonical messages, as `request` lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from openenv.capture.canonical import CanonicalRequest
from openenv.capture.engine import EngineSpec
from openenv.export.log import log_name
from openenv.harness.episode_settings import EpisodeSettings, fold_words
from openenv.harness.models import HarnessObservation
from openenv.harness.summary import EpisodeSummary, Policy

__all__ = ["EpisodeRequest", "EvalEpisodeResult", "run_recorded_episode"]


class EpisodeRequest(BaseModel):
    """Which episode to run (harness, task, policy), on which engine and how: the two values every road
    into an episode passes (`EngineSpec`, `EpisodeSettings`; default engine: `EngineSpec.of()`, the
    environment's). The settings may be given flat (`max_tokens=`, `timeout_s=`, `sandbox=`, ...); the
    engine in words only at the CLI and MCP edge (`episode_settings.fold_words`)."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    task: str
    task_set: str = "builtin"
    policy: Policy = "sample"
    look_first: bool = False  # the oracle lists the workspace before it acts
    look_after: bool = False  # ... or right after it acts
    engine: EngineSpec = Field(default_factory=EngineSpec.of)
    settings: EpisodeSettings = EpisodeSettings()

    @model_validator(mode="before")
    @classmethod
    def _words(cls, data: Any) -> Any:
        return fold_words(data, settings="settings")


class EvalEpisodeResult(BaseModel):
    """An episode's id, its summary, and where its log is."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    summary: EpisodeSummary
    trajectory: str
    error: str | None = None
    node: str | None = Field(
        default=None, description="the node that ran it (a Ray node id, or local:<host>)"
    )


def run_recorded_episode(
    request: EpisodeRequest, out_dir: Path, *, server: object | None = None
) -> EvalEpisodeResult:
    """Run one episode to the end and write `out_dir/<episode_id>.jsonl`.

    Args:
        request: the episode (harness, task, policy), its engine and its settings.
        out_dir: where the log goes.
        server: a started `CaptureServer` to share (default: the process's one for the backend).

    Raises:
        NotFound: unknown harness or task. BadRequest: `vllm` without a URL; a harness or task id that is
            not a plain name (`../x`, `a/b`): it names the log file.
    """
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.rollout import run_episode, save_trajectory
    from openenv.harness.tasks import find_task

    episode_id = log_name(request.harness, request.task)  # refuses '../x' before anything runs
    task = find_task(request.task, request.task_set)
    env = HarnessEnvironment(
        request.harness,
        server=server,
        engine=request.engine,
        settings=request.settings,
    )
    requests: dict[str, CanonicalRequest] = {}

    def remember(obs: HarnessObservation) -> None:
        if obs.pending is not None and not obs.pending.aux:
            requests[obs.pending.turn_id] = obs.pending.request

    try:
        obs, summary = run_episode(
            env,
            task,
            policy=request.policy,
            on_step=remember,
            timeout_s=request.settings.timeout_s,
            look_first=request.look_first,
            look_after=request.look_after,
        )
        path = save_trajectory(out_dir / f"{episode_id}.jsonl", env, obs, summary, requests)
    finally:
        env.close()
    summary.trajectory = str(path)
    return EvalEpisodeResult(
        episode_id=episode_id, summary=summary, trajectory=str(path), error=summary.error
    )
