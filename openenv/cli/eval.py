"""`openenv eval`: harnesses x tasks, run concurrently with progress bars; a solve-rate table and a chart."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from openenv.cli._errors import fail, one_line
from openenv.extras import install_hint

if TYPE_CHECKING:
    from openenv.eval import EvalEpisodeResult, EvalPlan, Report
    from openenv.executor import EpisodeExecutor

__all__ = ["eval_", "register"]

_err = Console(stderr=True)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def eval_(
    harness: Annotated[str, typer.Option(help="comma-separated harness names, e.g. pi,mini-swe-agent")],
    tasks: Annotated[
        str,
        typer.Option(
            help="task set: builtin, a Harbor folder, a parquet/jsonl file, or a Harbor "
            "dataset NAME@VERSION (see --registry)"
        ),
    ] = "builtin",
    registry: Annotated[
        str | None,
        typer.Option(
            help="Harbor registry (file or URL) that NAME@VERSION is looked up in "
            "(default $OPENENV_HARBOR_REGISTRY, else Harbor's public one)"
        ),
    ] = None,
    only: Annotated[str | None, typer.Option(help="comma-separated task ids to keep from the set")] = None,
    backend: Annotated[str, typer.Option(help="local or vllm")] = "local",
    policy: Annotated[
        str,
        typer.Option(
            help="sample (the model answers), oracle (reference solution, run as "
            "Harbor runs it) or demo (the solution's own commands: demonstrations "
            "to train on)"
        ),
    ] = "sample",
    look_first: Annotated[
        bool,
        typer.Option(
            "--look-first",
            help="with --policy oracle or demo: list the workspace before acting (one more tool call)",
        ),
    ] = False,
    look_after: Annotated[
        bool,
        typer.Option(
            "--look-after",
            help="with --policy oracle or demo: list the "
            "workspace right after acting (one more tool call that cannot "
            "cost the solve)",
        ),
    ] = False,
    n: Annotated[int, typer.Option("-n", help="episodes per (harness, task)")] = 1,
    concurrency: Annotated[
        int | None,
        typer.Option(help="episodes at once (default 2; with --ray: every episode slot the cluster offers)"),
    ] = None,
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL (default $OPENENV_VLLM_URL)")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="cap on each sampled reply")] = None,
    timeout: Annotated[float | None, typer.Option(help="per-episode harness budget in seconds")] = None,
    sandbox: Annotated[
        str,
        typer.Option(
            help="local (bubblewrap here) or docker (a container of the task's "
            "image, no network but the proxy)"
        ),
    ] = "local",
    pull: Annotated[
        str | None,
        typer.Option(
            "--pull",
            metavar="missing|always|never",
            help="--sandbox docker: pull a task image the engine lacks "
            "(missing, the default, as Docker's), ask the registry again once per run (always), or never (offline); "
            "default $OPENENV_PULL, else missing",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="results folder")] = Path("artifacts/eval"),
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report on stdout")] = False,
    allow_errors: Annotated[
        bool,
        typer.Option(
            "--allow-errors",
            help="exit 0 even when episodes ended in status "
            "error (they are still counted apart, never scored)",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS|auto",
            help="run the episodes on a Ray cluster (`auto`: the one this machine "
            "is part of); needs --backend vllm and " + escape(install_hint("ray")),
        ),
    ] = None,
) -> None:
    """Run every harness on every task; write results.md, results.json and solve_rate.png to --out.

    An episode our side failed (status error: engine, proxy, sandbox, verifier) is counted in the `errors`
    column and in no other; the command then exits 1 (after writing the report) unless --allow-errors.
    """
    from pydantic import ValidationError

    from openenv.errors import OpenEnvError
    from openenv.eval import EvalPlan, summarize, write_report
    from openenv.harness.episode_settings import fold_words
    from openenv.harness.tasks import load_task_set

    if pull not in (None, "missing", "always", "never"):
        fail(f"--pull is missing|always|never, got {pull!r}", code=2)
    if registry:  # for this process and every episode worker it starts
        os.environ["OPENENV_HARBOR_REGISTRY"] = registry
    try:
        names = _csv(harness)
        _check_harnesses(names)  # every name before anything runs: a typo is not a 0% row
        ids = [t.id for t in load_task_set(tasks)]
        wanted = _csv(only) if only else ids
        unknown = sorted(set(wanted) - set(ids))
        if unknown:
            fail(f"task set {tasks!r} has no task(s) {', '.join(unknown)}; it has {', '.join(ids)}")
        words = dict(
            harnesses=names,
            tasks=wanted,
            task_set=tasks,
            backend=backend,
            policy=policy,
            look_first=look_first,
            look_after=look_after,
            repeats=n,
            concurrency=concurrency or 2,
            model=str(model) if model else None,
            vllm_url=vllm_url,
            max_tokens=max_tokens,
            timeout_s=timeout,
            sandbox=sandbox,
            pull=pull,
        )  # CLI strs: EvalPlan (pydantic) validates them into its Literals
        plan = EvalPlan.model_validate(fold_words(words, settings="episode", engine="engine"))
        if not ray:  # a Ray run checks every node the same way (EpisodeWorker)
            _preflight(plan)
        executor = _ray_executor(plan, ray, concurrency) if ray else None
    except ValidationError as exc:
        fail(one_line(exc.errors()[0].get("msg", exc)) if exc.errors() else str(exc), code=2)
    except OpenEnvError as exc:
        fail(exc.message, code=2)
    try:
        results = _run_with_progress(plan, out, executor)
    finally:
        if executor is not None:
            executor.close()
    report = summarize(results, backend=backend, policy=policy, tasks=wanted, repeats=n)
    paths = write_report(report, out)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json")))
    else:
        _print_table(report)
        for kind, path in paths.items():
            _err.print(f"{kind}: {path}")
    errors = sum(r.errors for r in report.rows)
    if errors and not allow_errors:  # the table is still written: the scored episodes are real results
        typer.echo(
            f"error: {errors} of {len(results)} episodes ended in status error (our side failed; not in the "
            "solve rates); their causes are above and in results.json",
            err=True,
        )
        raise typer.Exit(1)


def _check_harnesses(names: list[str]) -> None:
    """Every harness name is known (NotFound lists the known ones), each named once."""
    from openenv.harness.catalog import get_spec

    if not names:
        fail("--harness names no harness (comma-separated names, e.g. pi,codex)", code=2)
    for name in names:
        get_spec(name)


def _preflight(plan: EvalPlan) -> None:
    """What this machine lacks for the plan (harness CLIs, the engine, Docker): one line, nothing run."""
    from openenv.executor.preflight import node_problems

    problems = node_problems(plan.engine, plan.harnesses, plan.episode.sandbox)
    if problems:
        fail(
            problems[0],
            "nothing was run: fix that, then run the same command again"
            + (f" ({len(problems) - 1} more: {'; '.join(problems[1:])})" if len(problems) > 1 else ""),
        )


def _ray_executor(plan: EvalPlan, address: str, slots: int | None) -> EpisodeExecutor:
    """Connect to the cluster and start the episode workers (each checks its node first)."""
    from openenv.executor.cluster import RayExecutor

    _err.print(f"connecting to the Ray cluster at {address} and starting the episode workers")
    executor = RayExecutor(
        address, engine=plan.engine, harnesses=plan.harnesses, slots=slots, sandbox=plan.episode.sandbox
    )
    nodes = executor.nodes()
    _err.print(
        f"{executor.slots} episode workers on {len(set(nodes.values()))} node(s): "
        f"{', '.join(sorted(set(nodes.values())))}"
    )
    return executor


def _run_with_progress(
    plan: EvalPlan, out: Path, executor: EpisodeExecutor | None = None
) -> list[EvalEpisodeResult]:
    """One bar per harness plus a total, advanced as episodes finish (on stderr: stdout stays clean)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from openenv.eval import run_eval
    from openenv.eval.report import is_error

    per_harness = len(plan.tasks) * plan.repeats
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("solved {task.fields[solved]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_err) as progress:
        bars = {h: progress.add_task(h, total=per_harness, solved=0) for h in plan.harnesses}
        total = progress.add_task("all", total=per_harness * len(plan.harnesses), solved=0)
        solved: dict[str, int] = dict.fromkeys(plan.harnesses, 0)

        def advance(result: EvalEpisodeResult) -> None:
            h = result.summary.harness
            failed = is_error(result)
            solved[h] += not failed and (result.summary.reward or 0.0) >= 1.0
            progress.update(bars[h], advance=1, solved=solved[h])
            progress.update(total, advance=1, solved=sum(solved.values()))
            if failed:
                progress.console.print(
                    f"error (not scored) {h} {result.summary.task}: {result.error or result.summary.error}",
                    markup=False,
                    soft_wrap=True,
                )

        return run_eval(plan, out, on_result=advance, executor=executor)


def _print_table(report: Report) -> None:
    table = Table(
        "harness",
        "episodes",
        "scored",
        "solved",
        "solve rate",
        "mean reward",
        "mean tool calls",
        "mean turns",
        "errors",
        caption="solve rate = solved / scored; errors (our side failed) count nowhere else",
    )
    for r in report.rows:
        table.add_row(*r.cells())
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_)
