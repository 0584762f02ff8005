"""`openenv harness list|install`, `openenv tasks` and `openenv run`: harness episodes from the shell.

Heavy imports (the capture server, torch) stay inside command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from rich.console import Console
from rich.table import Column, Table

from openenv.cli._errors import fail, one_line
from openenv.cli._output import stdout_to_stderr

__all__ = ["check_docker", "install_harness", "list_harnesses", "register", "run", "tasks"]

harness_app = typer.Typer(
    help="List, install and qualify the harness CLIs (pinned versions, cached in "
    "$OPENENV_HARNESS_CACHE; default /var/cache/openenv/harnesses for root, "
    "~/.cache/openenv/harnesses for anyone else).",
    no_args_is_help=True,
)
_err = Console(stderr=True)


@harness_app.command("list")
def list_harnesses(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object per line and harness: name, package, version, dialect, shell_tool, installed, "
            "ready, docker (null when not installed, else true or the reason it cannot run there); "
            "then one per harness tried that cannot run here, with `unsupported` holding the reason",
        ),
    ] = False,
) -> None:
    """Show every harness with its pinned version, dialect and install status, then those tried that
    cannot run here, with the reason."""
    from openenv.harness.catalog import get_spec, harness_names, unsupported_harnesses
    from openenv.harness.install import docker_blocker, install_status

    rows: list[dict[str, Any]] = []
    for name in harness_names():
        spec = get_spec(name)
        status = install_status(spec)
        blocker = docker_blocker(spec) if status.ready else None
        rows.append(
            {
                "name": name,
                "package": f"{spec.install.method}:{spec.install.package}",
                "version": spec.install.version,
                "dialect": spec.dialect,
                "shell_tool": spec.shell_tool.name,
                "installed": status.installed,
                "ready": status.ready,
                "docker": None if not status.ready else True if blocker is None else blocker,
            }
        )
    if as_json:
        for row in rows:
            print(json.dumps(row))
        for tried in unsupported_harnesses():
            print(json.dumps({"name": tried.name, "package": tried.package, "unsupported": tried.reason}))
        return
    table = Table("pinned", "installed", "dialect", "shell tool", "docker")
    # Names whole at any width (80 columns when piped): the other columns give way.
    table.columns.insert(0, Column("harness", no_wrap=True, min_width=max(len(row["name"]) for row in rows)))
    for row in rows:
        installed = row["installed"]
        mark = f"[green]{installed}[/]" if row["ready"] else f"[red]{installed or 'no'}[/]"
        docker = row["docker"]
        cell = "-" if docker is None else "[green]ok[/]" if docker is True else "[red]no[/] (below)"
        table.add_row(row["name"], row["version"], mark, row["dialect"], row["shell_tool"], cell)
    Console().print(table)
    for row in rows:
        if isinstance(row["docker"], str):
            Console(soft_wrap=True).print(
                f"{row['name']} cannot run in the Docker sandbox: {row['docker']}", markup=False
            )
    unsupported = Table("not supported", "package", "why", title="tried, cannot run here")
    for tried in unsupported_harnesses():
        unsupported.add_row(tried.name, tried.package, tried.reason)
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
    task_set: Annotated[
        str,
        typer.Argument(
            help="`builtin`, a Harbor folder, a parquet/jsonl file, a Harbor dataset NAME@VERSION or a Hub id"
        ),
    ] = "builtin",
    registry: Annotated[
        str | None,
        typer.Option(
            help="Harbor registry (file or URL) for NAME@VERSION (default "
            "$OPENENV_HARBOR_REGISTRY, else Harbor's public one)"
        ),
    ] = None,
) -> None:
    """List the task ids of a task set."""
    from openenv.harness.tasks import load_task_set

    if registry:
        os.environ["OPENENV_HARBOR_REGISTRY"] = registry

    for task in load_task_set(task_set):
        first = task.instruction.splitlines()[0] if task.instruction else ""
        typer.echo(f"{task.id}\t{first[:90]}")


def _progress(obs: object) -> None:
    from openenv.harness.models import HarnessObservation

    assert isinstance(obs, HarnessObservation)
    tokens = len(obs.last_turn.token_ids) if obs.last_turn else 0
    where = "done" if obs.done else f"turn {obs.turns + 1} pending"
    _err.print(
        f"[dim]{time.strftime('%H:%M:%S')}[/] turns {obs.turns} · tool calls {obs.tool_calls} · "
        f"last reply {tokens} tokens · harness {obs.harness_status} · {where}",
        soft_wrap=True,
    )


def run(
    harness: Annotated[str, typer.Option(help="harness name (see `openenv harness list`)")],
    task: Annotated[str, typer.Option(help="task id (see `openenv tasks`)")] = "fix-temperature-conversion",
    tasks_from: Annotated[
        str, typer.Option("--tasks", help="the task set the id is in (a Harbor dataset: NAME@VERSION)")
    ] = "builtin",
    registry: Annotated[
        str | None, typer.Option(help="Harbor registry (file or URL) for NAME@VERSION")
    ] = None,
    backend: Annotated[str, typer.Option(help="local (in-process transformers) or vllm")] = "local",
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL (default $OPENENV_VLLM_URL)")] = None,
    policy: Annotated[
        str,
        typer.Option(
            help="sample, run, oracle (applies the reference solution), demo (sends the "
            "solution's own commands: a demonstration to train on), or long (a "
            "scripted episode through a sub-agent and a compaction, then the solution)"
        ),
    ] = "sample",
    network: Annotated[
        str,
        typer.Option(
            help="loopback (auto): only the proxy is reachable; host: this "
            "machine's network (explicit opt-out, warned every episode)"
        ),
    ] = "auto",
    isolation: Annotated[
        str,
        typer.Option(
            help="bwrap: the local sandbox is a boundary (unprivileged uid, "
            "namespaces, cgroup); none: the harness runs on the host (explicit "
            "opt-out, warned every episode)"
        ),
    ] = "bwrap",
    sandbox: Annotated[
        str, typer.Option(help="local, or docker (a container whose only network is the proxy)")
    ] = "local",
    timeout: Annotated[float | None, typer.Option(help="harness wall-clock budget in seconds")] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="budget: model turns; the next request gets a "
            "final reply and the episode ends with status `budget`",
        ),
    ] = None,
    max_sampled_tokens: Annotated[
        int | None, typer.Option(min=1, help="budget: tokens sampled over the episode")
    ] = None,
    max_context_tokens: Annotated[
        int | None, typer.Option(min=1, help="budget: prompt + completion of any turn")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="trajectory JSONL (default artifacts/runs/...)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON summary on stdout")] = False,
    image_substitute: Annotated[
        list[str] | None,
        typer.Option(
            "--image-substitute",
            help="FROM=TO: run a Docker task whose image FROM is not in the engine on TO "
            "instead of pulling it (offline use), e.g. python:3.11-slim=openenv/base:latest, or '*=IMAGE' for "
            "any missing image; repeatable; each use is printed",
        ),
    ] = None,
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
) -> None:
    """Run one harness episode on one task and print the reward and the trajectory summary.

    Exit code 0: the episode was played and graded (any reward). 1: it ended in status `error` (our side:
    engine, proxy, sandbox, harness start, verifier; the cause is printed) or could not start. 2: bad usage.
    """
    from openenv.capture.budget import Budget
    from openenv.errors import OpenEnvError
    from openenv.harness.summary import Policy

    if (
        policy not in get_args(Policy)
        or backend not in ("local", "vllm")
        or sandbox not in ("local", "docker")
        or isolation not in ("bwrap", "none")
        or pull not in (None, "missing", "always", "never")
    ):
        fail(
            f"--policy is {'|'.join(get_args(Policy))}, --backend is local|vllm, --sandbox is local|docker, "
            "--isolation is bwrap|none, --pull is missing|always|never",
            code=2,
        )
    if registry:
        os.environ["OPENENV_HARBOR_REGISTRY"] = registry
    the_task = _checked(harness, task, tasks_from, backend, model, vllm_url, sandbox)
    # Library chatter (model builds, downloads) goes to stderr so `--json` stdout stays one object.
    try:
        with stdout_to_stderr():
            budget = Budget(
                max_turns=max_turns,
                max_sampled_tokens=max_sampled_tokens,
                max_context_tokens=max_context_tokens,
            )
            summary = _run_one(
                harness,
                the_task,
                tasks_from,
                backend,
                model,
                vllm_url,
                policy,
                network,
                sandbox,
                timeout,
                out,
                image_substitute or [],
                budget,
                isolation,
                pull,
            )
    except OpenEnvError as exc:  # a request the episode refused (a task this sandbox cannot run, ...)
        fail(exc.message)
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json")))
    else:
        _print_summary(summary)
    if summary.status == "error":
        typer.echo(
            f"error: the episode ended in status error, with no reward: {one_line(summary.error)}", err=True
        )
        raise typer.Exit(1)


def _checked(
    harness: str,
    task: str,
    tasks_from: str,
    backend: str,
    model: Path | None,
    vllm_url: str | None,
    sandbox: str,
) -> Any:
    """The task, once every name is known and this machine has what the episode needs; else one line
    and exit (nothing started, no engine waited on)."""

    from openenv.capture.engine import EngineSpec
    from openenv.errors import OpenEnvError
    from openenv.executor.preflight import node_problems
    from openenv.harness.catalog import get_spec
    from openenv.harness.tasks import find_task

    try:
        get_spec(harness)
        the_task = find_task(task, tasks_from)
    except OpenEnvError as exc:
        fail(exc.message)
    engine = EngineSpec.of(backend, model=model, vllm_url=vllm_url)
    if engine.backend == "vllm" and not engine.vllm_urls:
        fail(
            "--backend vllm needs an engine: pass --vllm-url http://HOST:PORT (or set OPENENV_VLLM_URL)",
            code=2,
        )
    if sandbox == "docker":
        check_docker()
    problems = node_problems(engine, [harness])
    if problems:
        fail(
            problems[0],
            "nothing was run: fix that, then run the same command again"
            + (
                f" ({len(problems) - 1} more problem(s): {'; '.join(problems[1:])})"
                if len(problems) > 1
                else ""
            ),
        )
    return the_task


def check_docker() -> None:
    """`--sandbox docker` needs the Docker SDK and an engine that answers."""
    try:
        from openenv.harness.sandbox.docker_engine import engine_available
    except ModuleNotFoundError as exc:
        from openenv.extras import install_hint

        fail(
            f"--sandbox docker needs the Python package {exc.name!r}",
            f"install it with: {install_hint('docker')}",
        )
    reason = engine_available()
    if reason is not None:
        fail(
            f"--sandbox docker needs a running Docker engine, and none answers here ({reason.split(';')[0]})",
            "start Docker (e.g. `sudo systemctl start docker`, or `sudo dockerd &`) or run with --sandbox local",
        )


_FIELDS = (
    "reward",
    "status",
    "turns",
    "tool_calls",
    "sequences",
    "merge_ratio",
    "trained/sampled",
    "aux",
    "wall s",
)


def _summary_cells(summary: Any) -> list[str]:
    reward = "none" if summary.reward is None else f"{summary.reward:g}"
    return [
        reward,
        str(summary.status),
        str(summary.turns),
        str(summary.tool_calls),
        str(summary.sequences),
        f"{summary.merge_ratio:.2f}",
        f"{summary.tokens_trained}/{summary.tokens_sampled} = {summary.trained_ratio:.2f}",
        f"{summary.aux_turns} ({summary.aux_tokens} tok)",
        f"{summary.wall_s:.1f}",
    ]


def _print_summary(summary: Any) -> None:
    """The summary table on a terminal; piped, the same fields one per line, whole (no 80-column cut)."""
    import sys

    if sys.stdout.isatty():
        table = Table(*_FIELDS)
        table.add_row(*_summary_cells(summary))
        Console().print(table)
        say = Console(soft_wrap=True).print
    else:
        for name, cell in zip(_FIELDS, _summary_cells(summary), strict=True):
            typer.echo(f"{name}: {cell}")
        say = Console(soft_wrap=True, no_color=True, highlight=False, width=10_000).print
    if len(summary.lineage) > 1:  # a branching episode: every row, where it came from, what it trains
        say(
            "sequences: "
            + " · ".join(
                f"{i} {line.origin}"
                + (f"<-{line.parent}" if line.parent is not None else "")
                + f" ({line.turns} turns, {line.tokens_trained} tok)"
                for i, line in enumerate(summary.lineage)
            ),
            markup=False,
        )
    for note in summary.notes:
        say(f"note: {note}", markup=False)
    if summary.budget_hit:
        say(f"budget: the episode hit {summary.budget_hit}; the harness got a final reply", markup=False)
    if summary.reward is None and summary.status != "error":
        say(f"no reward ({summary.reward_status}): {summary.no_reward_reason}", markup=False)
    if summary.tokens_sampled:  # what the recorded logprobs are (docs/training.md)
        at = "" if summary.temperature is None else f" at temperature {summary.temperature:g}"
        say(
            f"logprobs: {summary.logprob_mode}{at}, {'trainable' if summary.trainable else 'not trainable'}",
            markup=False,
        )
    say(f"trajectory: {summary.trajectory}", markup=False)


def _run_one(
    harness: str,
    task: Any,
    tasks_from: str,
    backend: str,
    model: Path | None,
    vllm_url: str | None,
    policy: str,
    network: str,
    sandbox: str,
    timeout: float | None,
    out: Path | None,
    substitutes: list[str] | None = None,
    budget: Any = None,
    isolation: str = "bwrap",
    pull: str | None = None,
) -> Any:
    """One episode with live progress on stderr; returns its summary with the trajectory path filled in."""
    from openenv.capture.engine import EngineSpec
    from openenv.export.log import log_name
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.episode_settings import EpisodeSettings
    from openenv.harness.rollout import run_episode, save_trajectory
    from openenv.harness.tasks import Task, find_task

    the_task = task if isinstance(task, Task) else find_task(task, tasks_from)
    substituted: dict[str, str] = {}
    if substitutes:  # the Docker SDK only when a Docker option is used: the local sandbox needs no `docker`
        from openenv.harness.sandbox.images import parse_substitutes

        substituted = parse_substitutes(substitutes)
    engine = EngineSpec.of(backend, model=model, vllm_url=vllm_url)
    settings = EpisodeSettings.model_validate(  # the CLI's strs, validated into the settings' Literals
        {
            "network": network,
            "sandbox": sandbox,
            "budget": budget,
            "isolation": isolation,
            "timeout_s": timeout,
            "image_substitutes": substituted,
            "pull": pull,
        }
    )
    env = HarnessEnvironment(harness, engine=engine, settings=settings)
    try:
        obs, summary = run_episode(
            env,
            the_task,
            policy=policy,  # type: ignore[arg-type]  # a CLI str; run_episode refuses an unknown policy
            on_step=_progress,
            timeout_s=timeout,
        )
        path = out or Path("artifacts/runs") / f"{log_name(harness, the_task.id)}.jsonl"  # unique per run
        summary.trajectory = str(save_trajectory(path, env, obs, summary))
    finally:
        env.close()
    return summary


def register(app: typer.Typer) -> None:
    app.add_typer(
        harness_app, name="harness"
    )  # `harness check` and `outdated` join it from cli/harness_check.py
    app.command("tasks")(tasks)
    app.command("run")(run)
