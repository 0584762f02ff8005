"""`run_eval`: every (harness, task, repeat) episode of a plan, run concurrently with progress bars.

Episodes are threads in one process, so they share one capture server (one model load) per backend.
A failed episode is kept as a result with its error and reward 0, never dropped: a harness that
crashes must show up in the table as unsolved, not vanish from it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from openenv.eval.episodes import Backend, EpisodeRequest, EpisodeResult, run_recorded_episode
from openenv.harness.rollout import EpisodeSummary, Policy

__all__ = ["EvalPlan", "Progress", "run_eval"]

Progress = Callable[[EpisodeResult], None]


class EvalPlan(BaseModel):
    """The grid to run: harnesses x tasks x repeats."""

    model_config = ConfigDict(extra="forbid")

    harnesses: list[str] = Field(min_length=1)
    tasks: list[str] = Field(min_length=1, description="task ids from `task_set`")
    task_set: str = "builtin"
    backend: Backend = "local"
    policy: Policy = "sample"
    repeats: int = Field(default=1, ge=1, description="episodes per (harness, task): the -n of pass@n")
    concurrency: int = Field(default=2, ge=1)
    model: str | None = None
    vllm_url: str | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None

    def requests(self) -> list[EpisodeRequest]:
        common = {"task_set": self.task_set, "backend": self.backend, "policy": self.policy, "model": self.model,
                  "vllm_url": self.vllm_url, "max_tokens": self.max_tokens, "timeout_s": self.timeout_s}
        return [EpisodeRequest(harness=h, task=t, **common)  # type: ignore[arg-type]
                for h in self.harnesses for t in self.tasks for _ in range(self.repeats)]


def run_eval(plan: EvalPlan, out_dir: Path, *, on_result: Progress | None = None) -> list[EpisodeResult]:
    """Run the plan; each episode's log goes to `out_dir/episodes/`. Results come back in plan order."""
    requests = plan.requests()
    logs = out_dir / "episodes"
    results: dict[int, EpisodeResult] = {}
    with ThreadPoolExecutor(plan.concurrency, thread_name_prefix="openenv-eval") as pool:
        futures = {pool.submit(_run_safely, req, logs): i for i, req in enumerate(requests)}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if on_result is not None:
                on_result(result)
    return [results[i] for i in range(len(requests))]


def _run_safely(request: EpisodeRequest, logs: Path) -> EpisodeResult:
    try:
        return run_recorded_episode(request, logs)
    except Exception as exc:  # noqa: BLE001 - one broken episode must not sink the whole table
        summary = EpisodeSummary(harness=request.harness, task=request.task, policy=request.policy, reward=0.0,
                                 status=None, turns=0, tool_calls=0, sequences=0, merge_ratio=0.0, aux_turns=0,
                                 reward_breakdown={}, wall_s=0.0)
        return EpisodeResult(episode_id=f"{request.harness}-{request.task}-failed", summary=summary,
                             trajectory="", error=f"{type(exc).__name__}: {exc}")
