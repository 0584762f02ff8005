"""`openenv eval`: harnesses x tasks, run concurrently with progress bars; a solve-rate table and a chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from openenv.eval import EvalEpisodeResult, EvalPlan, Report
    from openenv.executor import EpisodeExecutor

__all__ = ["eval_", "register"]

_err = Console(stderr=True)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def eval_(
    harness: Annotated[str, typer.Option(help="comma-separated harness names, e.g. pi,mini-swe-agent")],
    tasks: Annotated[str, typer.Option(help="task set: builtin, a Harbor folder, a parquet/jsonl file")]
    = "builtin",
    only: Annotated[str | None, typer.Option(help="comma-separated task ids to keep from the set")] = None,
    backend: Annotated[str, typer.Option(help="local or vllm")] = "local",
    policy: Annotated[str, typer.Option(help="sample (the model answers) or oracle (reference solution)")]
    = "sample",
    n: Annotated[int, typer.Option("-n", help="episodes per (harness, task)")] = 1,
    concurrency: Annotated[int | None, typer.Option(help="episodes at once (default 2; with --ray: every "
                                                         "episode slot the cluster offers)")] = None,
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL (default $OPENENV_VLLM_URL)")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="cap on each sampled reply")] = None,
    timeout: Annotated[float | None, typer.Option(help="per-episode harness budget in seconds")] = None,
    sandbox: Annotated[str, typer.Option(help="local (bubblewrap here) or docker (a container of the task's "
                                              "image, no network but the proxy)")] = "local",
    out: Annotated[Path, typer.Option(help="results folder")] = Path("artifacts/eval"),
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report on stdout")] = False,
    ray: Annotated[str | None, typer.Option("--ray", metavar="ADDRESS|auto",
                                            help="run the episodes on a Ray cluster (`auto`: the one this machine "
                                                 "is part of); needs --backend vllm and pip install "
                                                 "'openenv[ray]'")] = None,
) -> None:
    """Run every harness on every task; write results.md, results.json and solve_rate.png to --out."""
    from pydantic import ValidationError

    from openenv.errors import OpenEnvError
    from openenv.eval import EvalPlan, summarize, write_report
    from openenv.harness.tasks import load_task_set

    try:
        ids = [t.id for t in load_task_set(tasks)]
        wanted = _csv(only) if only else ids
        unknown = sorted(set(wanted) - set(ids))
        if unknown:
            raise typer.BadParameter(f"task set {tasks!r} has no task(s) {unknown}; it has {ids}")
        plan = EvalPlan(harnesses=_csv(harness), tasks=wanted, task_set=tasks, backend=backend,  # type: ignore[arg-type]
                        policy=policy, repeats=n, concurrency=concurrency or 2,  # type: ignore[arg-type]
                        model=str(model) if model else None, vllm_url=vllm_url, max_tokens=max_tokens,
                        timeout_s=timeout, sandbox=sandbox)  # type: ignore[arg-type]
        executor = _ray_executor(plan, ray, concurrency) if ray else None
    except (OpenEnvError, ValidationError) as exc:
        _err.print(f"[red]error:[/] {getattr(exc, 'message', exc)}")
        raise typer.Exit(2) from None
    try:
        results = _run_with_progress(plan, out, executor)
    finally:
        if executor is not None:
            executor.close()
    report = summarize(results, backend=backend, policy=policy, tasks=wanted, repeats=n)
    paths = write_report(report, out)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
        return
    _print_table(report)
    for kind, path in paths.items():
        _err.print(f"{kind}: {path}")


def _ray_executor(plan: EvalPlan, address: str, slots: int | None) -> EpisodeExecutor:
    """Connect to the cluster and start the episode workers (each checks its node first)."""
    from openenv.executor.cluster import RayExecutor

    _err.print(f"connecting to the Ray cluster at {address} and starting the episode workers")
    executor = RayExecutor(address, engine=plan.engine(), harnesses=plan.harnesses, slots=slots,
                           sandbox=plan.sandbox)
    nodes = executor.nodes()
    _err.print(f"{executor.slots} episode workers on {len(set(nodes.values()))} node(s): "
               f"{', '.join(sorted(set(nodes.values())))}")
    return executor


def _run_with_progress(
    plan: EvalPlan, out: Path, executor: EpisodeExecutor | None = None
) -> list[EvalEpisodeResult]:
    """One bar per harness plus a total, advanced as episodes finish (on stderr: stdout stays clean)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from openenv.eval import run_eval
    per_harness = len(plan.tasks) * plan.repeats
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("solved {task.fields[solved]}"), TimeElapsedColumn())
    with Progress(*columns, console=_err) as progress:
        bars = {h: progress.add_task(h, total=per_harness, solved=0) for h in plan.harnesses}
        total = progress.add_task("all", total=per_harness * len(plan.harnesses), solved=0)
        solved: dict[str, int] = dict.fromkeys(plan.harnesses, 0)

        def advance(result: EvalEpisodeResult) -> None:
            h = result.summary.harness
            solved[h] += (result.summary.reward or 0.0) >= 1.0
            progress.update(bars[h], advance=1, solved=solved[h])
            progress.update(total, advance=1, solved=sum(solved.values()))
            if result.error:
                progress.console.print(f"[red]{h} {result.summary.task}: {result.error}[/]")

        return run_eval(plan, out, on_result=advance, executor=executor)


def _print_table(report: Report) -> None:
    table = Table("harness", "episodes", "solved", "solve rate", "mean reward", "mean tool calls", "mean turns",
                  "errors")
    for r in report.rows:
        table.add_row(r.harness, str(r.episodes), str(r.solved), f"{r.solve_rate:.0%}", f"{r.mean_reward:.3f}",
                      f"{r.mean_tool_calls:.2f}", f"{r.mean_turns:.2f}", str(r.errors))
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_)
