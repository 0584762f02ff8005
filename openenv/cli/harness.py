"""`openenv harness list|install`, `openenv tasks` and `openenv run`: harness episodes from the shell.

Heavy imports (the capture server, torch) stay inside command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from openenv.cli._output import stdout_to_stderr

__all__ = ["install_harness", "list_harnesses", "register", "run", "tasks"]

harness_app = typer.Typer(help="List and install the harness CLIs (pinned versions, cached in "
                          "$OPENENV_HARNESS_CACHE, default ~/.cache/openenv/harnesses).",
                          no_args_is_help=True)
_err = Console(stderr=True)


@harness_app.command("list")
def list_harnesses() -> None:
    """Show every harness with its pinned version, dialect and install status, then those tried that
    cannot run here, with the reason."""
    from openenv.harness.catalog import get_spec, harness_names, unsupported_harnesses
    from openenv.harness.install import install_status

    table = Table("harness", "pinned", "installed", "dialect", "shell tool")
    for name in harness_names():
        spec = get_spec(name)
        status = install_status(spec)
        mark = f"[green]{status.installed}[/]" if status.ready else f"[red]{status.installed or 'no'}[/]"
        table.add_row(name, spec.install.version, mark, spec.dialect, spec.shell_tool.name)
    Console().print(table)
    unsupported = Table("not supported", "package", "why", title="tried, cannot run here")
    for row in unsupported_harnesses():
        unsupported.add_row(row.name, row.package, row.reason)
    Console().print(unsupported)


@harness_app.command("install")
def install_harness(
    names: Annotated[list[str], typer.Argument(help="harness names, or `all`")],
) -> None:
    """Install harnesses into the harness cache (a no-op for those already at their pinned version)."""
    from openenv.errors import OpenEnvError
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install

    try:
        for name in names:
            if name != "all":
                get_spec(name)
        install(names)
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None


def tasks(
    task_set: Annotated[str, typer.Argument(help="`builtin`, a Harbor folder, a parquet/jsonl file or a Hub id")]
    = "builtin",
) -> None:
    """List the task ids of a task set."""
    from openenv.harness.tasks import load_task_set

    for task in load_task_set(task_set):
        first = task.instruction.splitlines()[0] if task.instruction else ""
        typer.echo(f"{task.id}\t{first[:90]}")


def _progress(obs: object) -> None:
    from openenv.harness.models import HarnessObservation

    assert isinstance(obs, HarnessObservation)
    tokens = len(obs.last_turn.token_ids) if obs.last_turn else 0
    where = "done" if obs.done else f"turn {obs.turns + 1} pending"
    _err.print(f"[dim]{time.strftime('%H:%M:%S')}[/] turns {obs.turns} · tool calls {obs.tool_calls} · "
               f"last reply {tokens} tokens · harness {obs.harness_status} · {where}", soft_wrap=True)


def run(
    harness: Annotated[str, typer.Option(help="harness name (see `openenv harness list`)")],
    task: Annotated[str, typer.Option(help="task id (see `openenv tasks`)")] = "fix-temperature-conversion",
    tasks_from: Annotated[str, typer.Option("--tasks", help="the task set the id is in")] = "builtin",
    backend: Annotated[str, typer.Option(help="local (in-process transformers) or vllm")] = "local",
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL (default $OPENENV_VLLM_URL)")] = None,
    policy: Annotated[str, typer.Option(help="sample, run, oracle (applies the reference solution), or long (a scripted "
                                         "episode through a sub-agent and a compaction, then the solution)")]
    = "sample",
    network: Annotated[str, typer.Option(help="loopback (auto): only the proxy is reachable; host: this "
                                         "machine's network (explicit opt-out, warned every episode)")] = "auto",
    isolation: Annotated[str, typer.Option(help="bwrap: the local sandbox is a boundary (unprivileged uid, "
                                           "namespaces, cgroup); none: the harness runs on the host (explicit "
                                           "opt-out, warned every episode)")] = "bwrap",
    sandbox: Annotated[str, typer.Option(help="local, or docker (a container whose only network is the proxy)")]
    = "local",
    timeout: Annotated[float | None, typer.Option(help="harness wall-clock budget in seconds")] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="budget: model turns; the next request gets a "
                                                  "final reply and the episode ends with status `budget`")] = None,
    max_sampled_tokens: Annotated[int | None, typer.Option(min=1, help="budget: tokens sampled over the episode")]
    = None,
    max_context_tokens: Annotated[int | None, typer.Option(min=1, help="budget: prompt + completion of any turn")]
    = None,
    out: Annotated[Path | None, typer.Option(help="trajectory JSONL (default artifacts/runs/...)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON summary on stdout")] = False,
    image_substitute: Annotated[list[str] | None, typer.Option(
        "--image-substitute", help="FROM=TO: run a Docker task whose image FROM is not in the engine on TO "
        "instead (nothing can be pulled here), e.g. python:3.11-slim=openenv/base:latest, or '*=IMAGE' for "
        "any missing image; repeatable; each use is printed")] = None,
) -> None:
    """Run one harness episode on one task and print the reward and the trajectory summary."""
    from openenv.capture.budget import Budget
    from openenv.errors import OpenEnvError

    if policy not in ("sample", "run", "oracle", "long") or backend not in ("local", "vllm") \
            or sandbox not in ("local", "docker") or isolation not in ("bwrap", "none"):
        _err.print("[red]error:[/] --policy is sample|run|oracle|long, --backend is local|vllm, "
                   "--sandbox is local|docker, --isolation is bwrap|none")
        raise typer.Exit(2)
    try:
        # Library chatter (model builds, downloads) goes to stderr so `--json` stdout stays one object.
        with stdout_to_stderr():
            budget = Budget(max_turns=max_turns, max_sampled_tokens=max_sampled_tokens,
                            max_context_tokens=max_context_tokens)
            summary = _run_one(harness, task, tasks_from, backend, model, vllm_url, policy, network, sandbox,
                               timeout, out, image_substitute or [], budget, isolation)
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json")))
        return
    table = Table("reward", "status", "turns", "tool_calls", "sequences", "merge_ratio", "trained/sampled", "aux",
                  "wall s")
    reward = "none" if summary.reward is None else f"{summary.reward:g}"
    table.add_row(reward, str(summary.status), str(summary.turns), str(summary.tool_calls),
                  str(summary.sequences), f"{summary.merge_ratio:.2f}",
                  f"{summary.tokens_trained}/{summary.tokens_sampled} = {summary.trained_ratio:.2f}",
                  f"{summary.aux_turns} ({summary.aux_tokens} tok)", f"{summary.wall_s:.1f}")
    Console().print(table)
    if len(summary.lineage) > 1:  # a branching episode: every row, where it came from, what it trains
        Console().print("sequences: " + " · ".join(
            f"{i} {line.origin}" + (f"<-{line.parent}" if line.parent is not None else "")
            + f" ({line.turns} turns, {line.tokens_trained} tok)" for i, line in enumerate(summary.lineage)),
            soft_wrap=True)
    for note in summary.notes:
        Console().print(f"[yellow]note:[/] {note}", soft_wrap=True)
    if summary.budget_hit:
        Console().print(f"[yellow]budget[/]: the episode hit {summary.budget_hit}; the harness got a final reply")
    if summary.reward is None:
        Console().print(f"[yellow]no reward[/] ({summary.reward_status}): {summary.no_reward_reason}", soft_wrap=True)
    Console().print(f"trajectory: {summary.trajectory}")


def _run_one(harness: str, task: str, tasks_from: str, backend: str, model: Path | None, vllm_url: str | None,
             policy: str, network: str, sandbox: str, timeout: float | None, out: Path | None,
             substitutes: list[str] | None = None, budget: Any = None,
             isolation: str = "bwrap") -> Any:
    """One episode with live progress on stderr; returns its summary with the trajectory path filled in."""
    from openenv.export.log import log_name
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.rollout import run_episode, save_trajectory
    from openenv.harness.sandbox.images import parse_substitutes
    from openenv.harness.tasks import find_task

    the_task = find_task(task, tasks_from)
    env = HarnessEnvironment(harness, backend=backend, model=model, vllm_url=vllm_url,  # type: ignore[arg-type]
                             network=network, sandbox=sandbox, budget=budget,  # type: ignore[arg-type]
                             isolation=isolation,  # type: ignore[arg-type]
                             image_substitutes=parse_substitutes(substitutes or []))
    try:
        obs, summary = run_episode(env, the_task, policy=policy, on_step=_progress,  # type: ignore[arg-type]
                                   timeout_s=timeout)
        path = out or Path("artifacts/runs") / f"{log_name(harness, task)}.jsonl"  # unique per run
        summary.trajectory = str(save_trajectory(path, env, obs, summary))
    finally:
        env.close()
    return summary


def register(app: typer.Typer) -> None:
    app.add_typer(harness_app, name="harness")
    app.command("tasks")(tasks)
    app.command("run")(run)
