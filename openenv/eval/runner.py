"""`run_eval`: every (harness, task, repeat) episode of a plan, run concurrently with progress bars.

Episodes go through an executor (`openenv.executor`): by default threads of this process sharing the
run's capture servers (a `CapturePool` the run opens and closes: one model load per engine); with `executor=RayExecutor(...)` (`openenv eval --ray`),
`EpisodeWorker` actors across a cluster, each next to its own proxy. Either way the logs end up in
`out_dir/episodes/` (a Ray worker writes its log on its node; the driver fetches it when the episode ends).

An episode our side failed (status `error`: the engine, proxy, sandbox or verifier; or the episode raised)
is kept as a result with its cause and no reward, never dropped and never scored: the table counts it in
its own `errors` column. A harness that crashes on its own after playing is the harness's outcome and is
scored. An episode whose *worker* died (a lost node) says nothing about the harness, so it is run again
elsewhere, up to `LOST_RETRIES` times.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from openenv.capture.engine import CapturePool
from openenv.eval.episodes import EpisodeRequest, EvalEpisodeResult, run_recorded_episode
from openenv.executor.base import EngineSpec, EpisodeExecutor, ThreadExecutor, WorkerContext
from openenv.harness.episode_settings import EpisodeSettings, fold_words
from openenv.harness.summary import EpisodeSummary, Policy

__all__ = ["LOST_RETRIES", "EvalEpisodeJob", "EvalPlan", "Progress", "run_eval"]

Progress = Callable[[EvalEpisodeResult], None]
LOST_RETRIES = 2
_LOST = "WorkerLost"


class EvalPlan(BaseModel):
    """The grid to run: harnesses x tasks x repeats, on one engine, every episode with the same settings.

    The settings may be given flat (`max_tokens=`, `timeout_s=`, `sandbox=`, ...); the engine is an
    `EngineSpec` (default `EngineSpec.of()`, the environment's), in words only at the CLI and MCP edge
    (`episode_settings.fold_words`).
    """

    model_config = ConfigDict(extra="forbid")

    harnesses: list[str] = Field(min_length=1)
    tasks: list[str] = Field(min_length=1, description="task ids from `task_set`")
    task_set: str = "builtin"
    policy: Policy = "sample"
    look_first: bool = Field(
        default=False,
        description="the oracle (`oracle`, `demo`) lists the workspace before "
        "it acts: one more tool call, as an agent that inspects first",
    )
    look_after: bool = Field(
        default=False,
        description="the oracle lists the workspace right after it acts: one "
        "more tool call, as an agent that checks its work (it cannot undo the solve)",
    )
    repeats: int = Field(default=1, ge=1, description="episodes per (harness, task): the -n of pass@n")
    concurrency: int = Field(default=2, ge=1)
    engine: EngineSpec = Field(default_factory=EngineSpec.of)
    episode: EpisodeSettings = EpisodeSettings()

    @model_validator(mode="before")
    @classmethod
    def _words(cls, data: Any) -> Any:
        return fold_words(data, settings="episode")

    def requests(self) -> list[EpisodeRequest]:
        return [
            EpisodeRequest(
                harness=h,
                task=t,
                task_set=self.task_set,
                policy=self.policy,
                engine=self.engine,
                settings=self.episode,
                look_first=self.look_first,
                look_after=self.look_after,
            )
            for h in self.harnesses
            for t in self.tasks
            for _ in range(self.repeats)
        ]


@dataclass(frozen=True)
class EvalEpisodeJob:
    """One eval episode, as an executor job: runs `run_recorded_episode` wherever the executor puts it."""

    request: EpisodeRequest
    logs: str
    engine: EngineSpec

    @property
    def label(self) -> str:
        return f"{self.request.harness}/{self.request.task}"

    def run(self, context: WorkerContext) -> EvalEpisodeResult:
        logs = context.artifacts or Path(self.logs)
        try:
            server = context.capture(self.engine)
            result = run_recorded_episode(self.request, logs, server=server)
        except Exception as exc:
            result = self.lost(f"{type(exc).__name__}: {exc}")
        result.node = context.node_id
        return result

    def lost(self, reason: str) -> EvalEpisodeResult:
        request = self.request
        summary = EpisodeSummary(
            harness=request.harness,
            task=request.task,
            policy=request.policy,
            reward=None,
            reward_status="error",
            no_reward_reason=reason,
            status="error",
            error=reason,
            turns=0,
            tool_calls=0,
            sequences=0,
            merge_ratio=0.0,
            aux_turns=0,
            reward_breakdown={},
            wall_s=0.0,
        )
        return EvalEpisodeResult(
            episode_id=f"{request.harness}-{request.task}-failed",
            summary=summary,
            trajectory="",
            error=reason,
        )


def run_eval(
    plan: EvalPlan,
    out_dir: Path,
    *,
    on_result: Progress | None = None,
    executor: EpisodeExecutor | None = None,
) -> list[EvalEpisodeResult]:
    """Run the plan; each episode's log goes to `out_dir/episodes/`. Results come back in plan order.

    Args:
        executor: where episodes run (default: `plan.concurrency` threads here; closed on return). One
            that is passed in stays open: the caller closes it.
    """
    logs = out_dir / "episodes"
    engine = plan.engine
    jobs = [EvalEpisodeJob(request=req, logs=str(logs), engine=engine) for req in plan.requests()]
    own = executor is None
    pool = CapturePool()  # this run's capture servers (on threads): started on first use, stopped at its end
    runner = executor or ThreadExecutor(plan.concurrency, capture=pool.acquire)
    results: dict[int, EvalEpisodeResult] = {}
    tries = [1] * len(jobs)
    try:
        pending: dict[Future[Any], int] = {runner.submit(job): i for i, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = pending.pop(future)
                result: EvalEpisodeResult = future.result()
                if (result.error or "").startswith(_LOST) and tries[i] <= LOST_RETRIES:
                    tries[i] += 1
                    pending[runner.submit(jobs[i])] = i
                    continue
                if runner.kind != "thread" and result.trajectory:
                    _bring_home(runner, result, logs)
                results[i] = result
                if on_result is not None:
                    on_result(result)
    finally:
        if own:
            runner.close()
        pool.close()
    return [results[i] for i in range(len(jobs))]


def _bring_home(executor: EpisodeExecutor, result: EvalEpisodeResult, logs: Path) -> None:
    """Copy a remote worker's episode log into `logs/` and point the result at the copy."""
    try:
        data = executor.fetch(result.node or "", result.trajectory)
    except Exception as exc:
        result.error = result.error or f"log left on node {result.node}: {type(exc).__name__}: {exc}"
        return
    logs.mkdir(parents=True, exist_ok=True)
    local = logs / Path(result.trajectory).name
    local.write_bytes(data)
    result.trajectory = str(local)
    result.summary.trajectory = str(local)
