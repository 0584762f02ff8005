"""`openenv harness check NAME[@VERSION]` and `openenv harness outdated`: is a new harness version safe?

Heavy imports (the environment, torch) stay inside the command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from openenv.cli._errors import fail
from openenv.cli._output import stdout_to_stderr
from openenv.cli.harness import check_docker, harness_app

__all__ = ["check", "outdated", "register"]

_err = Console(stderr=True)


def _sandboxes(choice: str) -> list[str]:
    if choice not in ("local", "docker", "both"):
        fail("--sandbox is local, docker or both", code=2)
    return ["local", "docker"] if choice == "both" else [choice]


def check(
    target: Annotated[
        str,
        typer.Argument(
            metavar="NAME[@VERSION]",
            help="a harness (see `openenv harness list`), optionally @ a version "
            "its registry has; default: the pinned version",
        ),
    ],
    sandbox: Annotated[
        str, typer.Option(help="local, docker or both: where the oracle solves the fixtures")
    ] = "local",
    pin: Annotated[
        bool,
        typer.Option(
            "--pin",
            help="when every check passes, make VERSION the harness's pin "
            "(its spec.yaml and the installer's table)",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the verdict as one JSON object on stdout")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(help="evidence folder (default artifacts/harness-check/NAME@VERSION/UTC-TIME)"),
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(
            help="scratch cache to install into (default: harness-check/"
            "NAME@VERSION beside the pinned harness cache; reused)"
        ),
    ] = None,
    fixtures: Annotated[
        str | None,
        typer.Option(
            help="comma-separated task ids the oracle solves: built-in "
            "tasks and bash-* Harbor fixtures (default "
            "fix-deep-merge,bash-strict-report)"
        ),
    ] = None,
    backend: Annotated[
        str, typer.Option(help="engine of the sampled episode: local (in-process tiny model) or vllm")
    ] = "local",
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL (default $OPENENV_VLLM_URL)")] = None,
) -> None:
    """Qualify a harness version in minutes, before pinning it.

    Installs NAME@VERSION into a scratch cache (the pinned installs stay as they are), starts it, checks it
    speaks its dialect through the proxy, lets the oracle solve the fixtures in each sandbox, and samples
    one episode with the tiny model (one training sequence per linear session, every sampled token
    trained, aux calls tagged).

    Prints a table (check, result, evidence file) and writes verdict.json beside the evidence.
    Exit code 0: every check passed. 1: a check failed (named on stderr). 2: bad usage.
    """
    from openenv.errors import OpenEnvError
    from openenv.harness.fixtures import DEFAULT_FIXTURES, bash_fixtures
    from openenv.harness.pins import parse_target, write_pin
    from openenv.harness.tasks import builtin_task_ids

    chosen = _sandboxes(sandbox)
    try:
        spec, version = parse_target(target)
    except OpenEnvError as exc:
        fail(exc.message, code=2)
    if "docker" in chosen:
        check_docker()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = results or Path("artifacts") / "harness-check" / f"{spec.name}@{version}" / stamp
    names = tuple(t.strip() for t in fixtures.split(",") if t.strip()) if fixtures else DEFAULT_FIXTURES
    known = [*builtin_task_ids(), *bash_fixtures()]
    if unknown := [n for n in names if n not in known]:
        fail(f"unknown fixture(s) {', '.join(unknown)}; known: {', '.join(known)}", code=2)
    from openenv.capture.engine import EngineSpec  # the heavy part, once the words are known good
    from openenv.harness.qualification import qualify, write_verdict

    engine = EngineSpec.of(backend, model=model, vllm_url=vllm_url)
    t0 = time.monotonic()
    with stdout_to_stderr(), _err.status(f"checking {spec.name}@{version}") as live:

        def progress(line: str) -> None:
            if line[:1] in "✓✗-":
                _err.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {line}", markup=True, highlight=False)
            live.update(f"[{time.monotonic() - t0:.0f} s] {spec.name}@{version}: {line}")

        verdict = qualify(
            spec,
            version,
            sandboxes=chosen,
            results=folder,
            fixtures=names,
            engine=engine,
            cache=cache,
            progress=progress,
        )
    if pin and verdict.passed:
        changed = write_pin(spec.name, version)
        verdict.pinned_now = True
        write_verdict(verdict)
        where = ", ".join(str(p) for p in changed) or "already the pin"
        _err.print(
            f"pinned {spec.name} {version} ({where}); install it with `openenv harness install {spec.name}`"
        )
    if as_json:
        typer.echo(verdict.model_dump_json())
    else:
        _print_verdict(verdict)
    if not verdict.passed:
        if pin:
            _err.print(f"--pin: {spec.name} stays at {spec.install.version} (a check failed)")
        fail(
            f"{spec.name}@{version} failed check(s): {', '.join(verdict.failed)}; evidence in {verdict.results_dir}"
        )


def _print_verdict(verdict: object) -> None:
    from openenv.harness.qualification import Verdict

    assert isinstance(verdict, Verdict)
    table = Table(
        "check",
        "result",
        "evidence",
        "detail",
        title=f"{verdict.harness}@{verdict.version} "
        f"(pinned {verdict.pinned}; {verdict.date}, openenv {verdict.commit or 'wheel'}, "
        f"{verdict.wall_s:.0f} s)",
    )
    for row in verdict.checks:
        color = "green" if row.ok else "red" if row.ok is False else "yellow"
        table.add_row(row.check, f"[{color}]{row.result}[/]", row.evidence or "-", row.detail)
    console = Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=False)
    console.print(table)
    console.print(f"verdict: {verdict.results_dir}/verdict.json", markup=False, highlight=False)


def outdated(
    names: Annotated[list[str] | None, typer.Argument(help="harness names (default: every harness)")] = None,
    timeout: Annotated[float, typer.Option(help="seconds each registry query may take")] = 20.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object per harness, one per line")
    ] = False,
) -> None:
    """Each harness's pinned version against the newest its registry offers.

    One light query per harness (`npm view PKG version`, `pip index versions PKG`, with your npm/pip
    registry settings), all at once, each with --timeout.

    Exit code 0 always when the registries answered (outdated pins are news, not errors); 1 when a
    registry could not be reached for some harness (that row says why).
    """
    from openenv.errors import OpenEnvError
    from openenv.harness.catalog import get_spec, harness_names
    from openenv.harness.latest import latest_versions

    try:
        specs = [get_spec(n) for n in (names or harness_names())]
    except OpenEnvError as exc:
        fail(exc.message, code=2)
    with _err.status(f"asking the registries about {len(specs)} harnesses"):
        rows = latest_versions(specs, timeout_s=timeout)
    if as_json:
        for row in rows:
            typer.echo(row.model_dump_json())
    else:
        table = Table("harness", "package", "pinned", "newest", "status")
        marks = {
            "current": "[green]up to date[/]",
            "outdated": "[yellow]newer available[/]",
            "ahead": "pin is newer",
            "unreachable": "[red]registry unreachable[/] (below)",
        }
        for row in rows:
            table.add_row(
                row.name, f"{row.registry}:{row.package}", row.pinned, row.latest or "-", marks[row.status]
            )
        Console().print(table)
        for row in rows:
            if row.status == "unreachable":
                Console(soft_wrap=True).print(
                    f"{row.name}: {row.registry} gave no version: {row.error}", markup=False
                )
        newer = [r for r in rows if r.status == "outdated"]
        if newer:
            Console(soft_wrap=True).print(
                "check one before pinning it: "
                + "; ".join(f"openenv harness check {r.name}@{r.latest}" for r in newer[:3]),
                markup=False,
            )
    if any(r.status == "unreachable" for r in rows):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `check` and `outdated` to the `openenv harness` group (`app` has it already)."""
    harness_app.command("check")(check)
    harness_app.command("outdated")(outdated)
