"""One harness episode run in-process and saved as a complete episode log (requests included).

`openenv.harness.rollout.run_episode` drives the episode; this adds what the viewer and SFT export need
and a plain `run` trajectory lacks: every answered request's canonical messages, as `request` lines.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openenv.capture.backends.named import BackendName
from openenv.capture.canonical import CanonicalRequest
from openenv.export.log import append_requests, log_name
from openenv.harness.environment import SandboxKind
from openenv.harness.models import HarnessObservation
from openenv.harness.rollout import EpisodeSummary, Policy

__all__ = ["EpisodeRequest", "EvalEpisodeResult", "run_recorded_episode"]


class EpisodeRequest(BaseModel):
    """Which episode to run, and how."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    task: str
    task_set: str = "builtin"
    backend: BackendName = "local"
    policy: Policy = "sample"
    model: str | None = Field(default=None, description="model folder; default: the tiny model")
    vllm_url: str | None = None
    max_tokens: int | None = Field(default=None, description="cap on each sampled reply (default 256)")
    timeout_s: float | None = None
    sandbox: SandboxKind = Field(default="local", description="where the harness runs: a "
                                                "bubblewrap sandbox here, or a Docker container of the task's image")


class EvalEpisodeResult(BaseModel):
    """An episode's id, its summary, and where its log is."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    summary: EpisodeSummary
    trajectory: str
    error: str | None = None
    node: str | None = Field(default=None, description="the node that ran it (a Ray node id, or local:<host>)")


def run_recorded_episode(
    request: EpisodeRequest, out_dir: Path, *, server: object | None = None
) -> EvalEpisodeResult:
    """Run one episode to the end and write `out_dir/<episode_id>.jsonl`.

    Args:
        request: harness, task, backend and policy.
        out_dir: where the log goes.
        server: a started `CaptureServer` to share (default: the process's one for the backend).

    Raises:
        NotFound: unknown harness or task. BadRequest: `vllm` without a URL; a harness or task id that is
            not a plain name (`../x`, `a/b`): it names the log file.
    """
    from openenv.harness.environment import DEFAULT_SAMPLING, HarnessEnvironment
    from openenv.harness.rollout import run_episode, save_trajectory
    from openenv.harness.tasks import find_task

    episode_id = log_name(request.harness, request.task)  # refuses '../x' before anything runs
    task = find_task(request.task, request.task_set)
    sampling = (DEFAULT_SAMPLING if request.max_tokens is None
                else DEFAULT_SAMPLING.model_copy(update={"max_tokens": request.max_tokens}))
    env = HarnessEnvironment(request.harness, server=server,  # type: ignore[arg-type]
                             backend=request.backend, model=request.model, vllm_url=request.vllm_url,
                             sampling=sampling, sandbox=request.sandbox)
    requests: dict[str, CanonicalRequest] = {}

    def remember(obs: HarnessObservation) -> None:
        if obs.pending is not None and not obs.pending.aux:
            requests[obs.pending.turn_id] = obs.pending.request

    try:
        obs, summary = run_episode(env, task, policy=request.policy, on_step=remember, timeout_s=request.timeout_s)
        path = save_trajectory(out_dir / f"{episode_id}.jsonl", env, obs, summary)
    finally:
        env.close()
    append_requests(path, requests)
    summary.trajectory = str(path)
    return EvalEpisodeResult(episode_id=episode_id, summary=summary, trajectory=str(path), error=summary.error)

