"""`openenv soak`: many short real-harness episodes with injected faults; a ledger of every request and leak."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from openenv.cli._output import stdout_to_stderr
from openenv.core.validation import validation_message

if TYPE_CHECKING:
    from openenv.executor import EpisodeExecutor
    from openenv.soak.runner import SoakConfig, SoakEpisodeResult, SoakReport

__all__ = ["register", "soak"]

_err = Console(stderr=True)


def soak(
    episodes: Annotated[int, typer.Option(help="how many episodes")] = 200,
    concurrency: Annotated[
        int | None,
        typer.Option(
            help="episodes at once (one proxy, relay and fault proxy each; "
            "default 6, with --ray every slot the cluster offers)"
        ),
    ] = None,
    harness: Annotated[str, typer.Option(help="the harness CLI every episode runs")] = "codex",
    seed: Annotated[int, typer.Option(help="shuffles the fault plan")] = 0,
    kinds: Annotated[
        str | None, typer.Option(help="comma-separated fault kinds to draw from (default: all)")
    ] = None,
    vllm_url: Annotated[
        str | None,
        typer.Option(help="vLLM base URL; default $OPENENV_VLLM_URL, else one is started on the tiny model"),
    ] = None,
    backend_timeout: Annotated[
        float, typer.Option(help="backend timeout (s); `upstream_slow` stalls past it")
    ] = 20.0,
    hang_timeout: Annotated[float, typer.Option(help="harness budget (s) in `harness_hung` episodes")] = 10.0,
    out: Annotated[Path | None, typer.Option(help="also write the JSON report here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON report on stdout")] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS|auto",
            help="run the episodes on Ray workers (each with its own fault proxy, "
            "proxy and relay on its node); the engine URL must be reachable "
            "from every node",
        ),
    ] = None,
) -> None:
    """Run the fault soak; exit 1 if any episode missed its expected outcome or anything was lost or leaked."""
    from pydantic import ValidationError

    from openenv.soak.runner import SoakConfig

    try:
        fields: dict[str, object] = {
            "episodes": episodes,
            "concurrency": concurrency or 6,
            "harness": harness,
            "seed": seed,
            "backend_timeout_s": backend_timeout,
            "hang_timeout_s": hang_timeout,
        }
        if kinds:
            fields["kinds"] = [k.strip() for k in kinds.split(",") if k.strip()]
        config = SoakConfig.model_validate(fields)
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc, "option")) from None
    # stdout carries only the report (`--json` pipes it); whatever the run prints goes to stderr.
    with stdout_to_stderr():
        report = _with_vllm(config, vllm_url or os.environ.get("OPENENV_VLLM_URL"), ray, concurrency)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report.model_dump_json(indent=2) + "\n")
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        _print_tables(report)
    if not _targets_met(report):
        raise typer.Exit(1)


def _with_vllm(
    config: SoakConfig, url: str | None, ray: str | None = None, slots: int | None = None
) -> SoakReport:
    if ray:
        if not url:
            raise typer.BadParameter("--ray needs --vllm-url (an engine every node reaches)")
        return _on_ray(config, url.rstrip("/"), ray, slots)
    if url:
        return _run_with_progress(config, url.rstrip("/"))
    from openenv.models import tiny_model_path
    from openenv.soak.vllm_server import VLLMServer

    _err.print("starting a vLLM CPU server on the tiny model (~30 s; pass --vllm-url to reuse one)")
    with VLLMServer(tiny_model_path()) as server:
        return _run_with_progress(config, server.base_url)


def _on_ray(config: SoakConfig, url: str, address: str, slots: int | None) -> SoakReport:
    from openenv.capture.engine import EngineSpec
    from openenv.errors import OpenEnvError
    from openenv.executor.cluster import RayExecutor

    try:
        executor = RayExecutor(
            address, engine=EngineSpec(vllm_urls=(url,)), harnesses=[config.harness], slots=slots
        )
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(2) from None
    ips = sorted(set(executor.nodes().values()))
    _err.print(f"{executor.slots} soak workers on {len(ips)} node(s): {', '.join(ips)}")
    try:
        return _run_with_progress(config, url, executor)
    finally:
        executor.close()


def _run_with_progress(config: SoakConfig, url: str, executor: EpisodeExecutor | None = None) -> SoakReport:
    """One bar, advanced as episodes finish, with the count of episodes that missed (on stderr)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from openenv.capture.engine import EngineSpec
    from openenv.soak.runner import run_soak

    columns = (
        TextColumn("soak {task.fields[harness]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("missed {task.fields[missed]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_err) as progress:
        bar = progress.add_task("soak", total=config.episodes, harness=config.harness, missed=0)
        missed = 0

        def advance(result: SoakEpisodeResult) -> None:
            nonlocal missed
            missed += not result.ok
            progress.update(bar, advance=1, missed=missed)

        engine = EngineSpec("vllm", vllm_urls=(url,))
        return run_soak(config, engine, on_result=advance, executor=executor)


def _targets_met(report: SoakReport) -> bool:
    return report.ok == report.episodes and not (
        report.lost_turns
        or report.duplicate_turns
        or report.env_missing_turns
        or report.gaps_unaccounted
        or report.leaked_processes
        or report.leaked_children
        or report.leaked_dirs
        or report.leaked_sessions
    )


def _print_tables(report: SoakReport) -> None:
    from openenv.soak.runner import FAULT_KINDS

    console = Console() if sys.stdout.isatty() else Console(width=120)  # piped: keep the rows whole
    kinds = Table(
        title=f"soak: {report.episodes} {report.config.harness} episodes, concurrency "
        f"{report.config.concurrency}, seed {report.config.seed}"
    )
    for column in ("fault", "episodes", "as expected", "statuses", "gaps", "faults hit", "replays", "mean s"):
        kinds.add_column(column, justify="left" if column in ("fault", "statuses") else "right")
    for name, k in sorted(report.per_kind.items(), key=lambda item: FAULT_KINDS.index(item[0])):
        statuses = ", ".join(f"{s} {n}" for s, n in sorted(k.statuses.items()))
        kinds.add_row(
            name,
            str(k.episodes),
            str(k.ok),
            statuses,
            str(k.gaps),
            str(k.faults_hit),
            str(k.replays),
            f"{k.wall_s / max(k.episodes, 1):.1f}",
        )
    console.print(kinds)
    totals = Table(title="ledger (targets: 0 lost, 0 duplicated, 0 unaccounted, 0 leaked)")
    totals.add_column("figure")
    totals.add_column("value", justify="right")
    for name, value in _ledger_rows(report):
        totals.add_row(name, value)
    console.print(totals)
    for failure in report.failures[:10]:
        console.print(f"[red]episode {failure.index} ({failure.kind}):[/] {'; '.join(failure.problems)}")


def _ledger_rows(r: SoakReport) -> list[tuple[str, str]]:
    return [
        ("requests sent by harnesses", str(r.requests)),
        ("turns recorded", str(r.turns)),
        ("refused after close (401)", str(r.refused)),
        ("retries replayed (identical)", f"{r.replays} ({r.replays_identical})"),
        ("lost turns", str(r.lost_turns)),
        ("duplicate turns", str(r.duplicate_turns)),
        ("turns missing from the env's trajectory", str(r.env_missing_turns)),
        ("backend gaps / faults injected", f"{r.gaps_backend} / {r.faults_hit}"),
        ("gaps from real backend timeouts (load)", str(r.backend_timeouts)),
        ("gaps at close (parked turns)", str(r.gaps_closed)),
        ("gaps unaccounted", str(r.gaps_unaccounted)),
        ("leaked processes (slow to die)", f"{r.leaked_processes} ({r.slow_cleanups})"),
        ("leaked child processes", str(r.leaked_children)),
        ("leaked sandbox folders", str(r.leaked_dirs)),
        ("leaked proxy sessions", str(r.leaked_sessions)),
        ("RSS MB start -> end", f"{r.rss_mb_start} -> {r.rss_mb_end}"),
        ("threads start -> end", f"{r.threads_start} -> {r.threads_end}"),
        ("fds start -> end", f"{r.fds_start} -> {r.fds_end}"),
        ("wall s", f"{r.wall_s}"),
    ]


def register(app: typer.Typer) -> None:
    app.command("soak")(soak)
