"""One episode, start to finish, with a policy in the loop; the summary and the JSONL trajectory.

Shared by `openenv run` and the end-to-end tests, so both drive the environment the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from openenv.capture.canonical import CanonicalRequest
from openenv.capture.logprob_mode import logprob_meaning
from openenv.errors import BadRequest, NotFound, OpenEnvError
from openenv.harness.catalog import get_spec, harness_names
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.long_episode import LongEpisodePolicy
from openenv.harness.models import HarnessAction, HarnessObservation
from openenv.harness.oracle import OraclePolicy
from openenv.harness.summary import EpisodeSummary, Policy, SequenceLine, log_line, request_line
from openenv.harness.tasks.model import Task
from openenv.paths import write_atomic

__all__ = ["run_episode", "save_trajectory"]


def _action(
    obs: HarnessObservation, policy: Policy, script: OraclePolicy | LongEpisodePolicy | None
) -> HarnessAction:
    if policy == "run":
        return HarnessAction(kind="run")
    if policy == "sample" or obs.pending is None or script is None:
        return HarnessAction(kind="sample")
    return HarnessAction(kind="complete", text=script.reply(obs.pending.request, aux=obs.pending.aux))


def run_episode(
    env: HarnessEnvironment,
    task: Task,
    *,
    policy: Policy = "sample",
    on_step: Callable[[HarnessObservation], None] | None = None,
    timeout_s: float | None = None,
    look_first: bool = False,
    solve: bool = True,
    look_after: bool = False,
) -> tuple[HarnessObservation, EpisodeSummary]:
    """Reset on `task`, answer every turn with `policy` until done, and summarize.

    `oracle` applies the task's reference solution through the harness's own tools (`bash /solution/solve.sh`,
    as Harbor's oracle runs it); `demo` sends the solution's own commands instead (a lone solve.sh's text),
    the demonstration a model can be trained on (`research/learning/learn.py`); `sample` lets the
    backend answer each turn; `run` hands the whole episode to the backend in one step. `look_first`
    makes the oracle list the workspace before it edits (one more turn, one more merge to check), `look_after`
    right after the solution (the same extra call where it cannot cost the solve).
    `long` starts the harness as its spec's `long_episode` recipe says and drives it through a sub-agent
    and a compaction before it applies the solution (`solve=False`: gives up instead; see
    `openenv/harness/long_episode.py`).

    Raises:
        BadRequest: `long` for a harness whose spec has no `long_episode` recipe.
    """
    start = time.monotonic()
    options: dict[str, object] = {"task": task, "stage_solution": policy in ("oracle", "long")}
    if timeout_s is not None:
        options["timeout_s"] = timeout_s
    spec = env.spec
    script: OraclePolicy | LongEpisodePolicy | None = None
    if policy in ("oracle", "demo"):
        script = OraclePolicy(
            spec, task, look_first=look_first, look_after=look_after, demonstrate=policy == "demo"
        )
    elif policy == "long":
        if spec.long_episode is None:
            having = ", ".join(n for n in harness_names() if get_spec(n).long_episode is not None)
            raise BadRequest(
                f"--policy long needs a long_episode recipe in {spec.name}'s spec.yaml (harnesses with "
                f"one: {having})"
            )
        env.spec = spec.long_variant()  # this episode only: restored below
        script = LongEpisodePolicy(env.spec, spec.long_episode, task, solve=solve)
    try:
        obs = _guarded(env, lambda: env.reset(**options), started=False)
        while not obs.done:
            if on_step is not None:  # outside the guard: the caller's own exception is not an episode's
                on_step(obs)
            current = obs
            obs = _guarded(env, lambda: env.step(_action(current, policy, script)), started=True)  # noqa: B023 (called at once)
    finally:
        env.spec = spec
    if on_step is not None:
        on_step(obs)
    stats = obs.stats
    error = obs.metadata.get("error")
    summary = EpisodeSummary(
        harness=env.spec.name,
        task=task.id,
        policy=policy,
        reward=obs.reward,
        status="error" if error else "budget" if obs.budget_hit else obs.harness_status,
        error=error,
        harness_status=obs.harness_status,
        budget_hit=obs.budget_hit,
        reward_status=obs.reward_status or "scored",
        no_reward_reason=obs.no_reward_reason,
        turns=obs.turns,
        tool_calls=obs.tool_calls,
        sequences=stats.sequences if stats else 0,
        merge_ratio=stats.merge_ratio if stats else 0.0,
        aux_turns=stats.aux if stats else 0,
        reward_breakdown=obs.reward_breakdown or {},
        wall_s=round(time.monotonic() - start, 2),
        tokens_sampled=stats.sampled_tokens if stats else 0,
        tokens_trained=sum(sum(row.env_mask) for row in obs.sequences or []),
        aux_tokens=stats.aux_tokens if stats else 0,
        malformed_tool_calls=stats.malformed_tool_calls if stats else 0,
        lineage=[
            SequenceLine(
                origin=row.origin,
                parent=row.parent,
                turns=len(row.turn_ids),
                tokens_trained=sum(row.env_mask),
            )
            for row in obs.sequences or []
        ],
        notes=[str(n) for n in obs.metadata.get("notes", [])],
        **logprob_meaning(obs.sequences or []),
    )
    return obs, summary


def _guarded(
    env: HarnessEnvironment, call: Callable[[], HarnessObservation], *, started: bool
) -> HarnessObservation:
    """`call()`, or, when our side fails under it (sandbox, harness start, proxy), the final observation of
    an `error` episode. The caller's mistakes (an unknown task, one this sandbox cannot run) still raise."""
    try:
        return call()
    except (BadRequest, NotFound):
        raise
    except Exception as exc:
        return _aborted(env, exc, started=started)


def _aborted(env: HarnessEnvironment, exc: Exception, *, started: bool) -> HarnessObservation:
    """The final observation of an episode our side could not start or finish (`exc` says why)."""
    reason = exc.message if isinstance(exc, OpenEnvError) else str(exc) or "(no message)"
    where = "the episode stopped" if started else "the episode could not start"
    env.close()  # kills whatever is left of the harness; the turns so far stay readable
    return HarnessObservation(
        done=True,
        reward=None,
        harness_status=env.state.harness_status,
        reward_status="error",
        no_reward_reason=f"{where}: {type(exc).__name__}: {reason}",
        metadata={"error": f"{where}: {type(exc).__name__}: {reason}"},
    )


def save_trajectory(
    path: Path,
    env: HarnessEnvironment,
    obs: HarnessObservation,
    summary: EpisodeSummary,
    requests: Mapping[str, CanonicalRequest] | None = None,
) -> Path:
    """Write the episode as JSONL: one `turn` line per turn (aux included), one `sequence` line per
    training row, the `summary` line, then one `request` line per turn id in `requests` (the canonical
    requests, for `openenv export`'s messages rows). Written whole or not at all (temp file, fsync,
    rename): a crash mid-write leaves no truncated log for `openenv export` to trip on. The requests ride
    in the same write: added afterwards (`append_requests`), the log was read back and written again."""
    lines = [log_line("turn", record) for record in env.trajectory()]
    lines += [log_line("sequence", row) for row in obs.sequences or []]
    lines.append(log_line("summary", summary))
    lines += [request_line(turn_id, request) for turn_id, request in (requests or {}).items()]
    return write_atomic(path, b"\n".join(lines) + b"\n")
