"""`openenv build [HARNESS|all]` and `openenv sandbox sweep`: harness images and Docker sandbox upkeep.

The Docker SDK is imported inside the command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

__all__ = ["build", "register", "sweep"]

sandbox_app = typer.Typer(
    help="Docker sandbox upkeep (orphaned containers from dead runs).", no_args_is_help=True
)
_out = Console(stderr=True)


def build(
    harness: Annotated[
        str, typer.Argument(help="a harness name from `openenv harness list`, or `all`")
    ] = "all",
    base: Annotated[
        str | None,
        typer.Option(
            help="BASE_IMAGE; default: openenv/python (env image) or openenv/base if built (--sandbox)"
        ),
    ] = None,
    network: Annotated[str, typer.Option(help="build network; `none` keeps the build offline")] = "none",
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox", help="build only the CLI image DockerSandbox runs (envs/<harness>/Dockerfile)"
        ),
    ] = False,
    model: Annotated[
        Path | None,
        typer.Option(help="model folder whose tokenizer the image bundles (default: the tiny model)"),
    ] = None,
) -> None:
    """Build a harness's env image: the pinned CLI, the env server and the capture proxy, served by
    `openenv serve HARNESS` and pointed at an engine by OPENENV_VLLM_URL (see openenv/harness/env_image.py).
    With --sandbox, the image of the CLI alone that `DockerSandbox` runs."""
    import docker

    from openenv.errors import OpenEnvError
    from openenv.harness.catalog import get_spec, harness_names
    from openenv.harness.sandbox.docker_engine import engine_available
    from openenv.harness.sandbox.images import build_harness_image

    try:  # names first: a typo fails before any engine work
        specs = [get_spec(name) for name in (harness_names() if harness == "all" else [harness])]
    except OpenEnvError as exc:
        _out.print(f"[red]{exc.message}[/]")
        raise typer.Exit(2) from exc
    if (reason := engine_available()) is not None:
        _out.print(f"[red]{reason}[/]")
        raise typer.Exit(1)
    client = docker.from_env()
    failed = []
    if not sandbox and harness == "all":
        skipped = [spec.name for spec in specs if spec.install.method != "npm"]
        specs = [spec for spec in specs if spec.install.method == "npm"]
        if skipped:
            _out.print(
                f"[yellow]skipped (pip harnesses are not bundled into env images yet): {', '.join(skipped)}[/]"
            )
    for spec in specs:
        name = spec.name
        try:
            if sandbox:
                tag = build_harness_image(
                    client,
                    spec,
                    base=base,
                    network=network,
                    progress=lambda line, n=name: _out.print(f"  {n}: {line}"),
                )
            else:
                tag = _build_env_image(client, spec, base, network, model, name)
            _out.print(f"[green]{name}: built {tag}[/]")
        except OpenEnvError as exc:
            _out.print(f"[red]{name}: {exc.message}[/]")
            failed.append(name)
    if failed:
        _out.print(f"[red]failed: {', '.join(failed)}[/]")
        raise typer.Exit(1)


def _build_env_image(
    client: Any, spec: Any, base: str | None, network: str, model: Path | None, name: str
) -> str:
    import tempfile

    from openenv.harness.env_image import build_env_image
    from openenv.models import tiny_model_path

    with tempfile.TemporaryDirectory(prefix="openenv-build-") as tmp:
        return build_env_image(
            client,
            spec,
            model=model or tiny_model_path(),
            base=base or "openenv/python:latest",
            network=network,
            workdir=Path(tmp),
            progress=lambda line: _out.print(f"  {name}: {line}"),
        )


@sandbox_app.command("sweep")
def sweep(
    everything: Annotated[
        bool, typer.Option("--all", help="remove every openenv sandbox, live owners too")
    ] = False,
) -> None:
    """Remove containers, volumes, networks and images left by openenv processes that died without cleaning up;
    garbage-collect the task images openenv pulled that no live run uses (down to $OPENENV_PULLED_KEEP_GB,
    default 20; --all: every one); and remove unpacked task images (local sandbox) no live process holds:
    unfinished ones, and those unused for $OPENENV_ROOTFS_MAX_AGE_DAYS (14) days, or all unheld ones with --all."""
    import docker

    from openenv.harness.sandbox.docker_engine import engine_available
    from openenv.harness.sandbox.rootfs import RootfsCache
    from openenv.harness.sandbox.sweeper import sweep as run_sweep

    roots = RootfsCache().gc(everything=everything)  # no daemon needed for these
    Console().print(f"removed {len(roots)} unpacked image roots")
    if (reason := engine_available()) is not None:
        _out.print(f"[yellow]no Docker objects swept[/]: {reason}")
        return
    report = run_sweep(docker.from_env(), everything=everything)
    Console().print(
        f"removed {len(report.containers)} containers, {len(report.volumes)} volumes, "
        f"{len(report.networks)} networks, {len(report.images)} images, {len(report.folders)} episode "
        f"folders; {len(report.pulled)} pulled images collected"
    )


def register(app: typer.Typer) -> None:
    """Add `build` and the `sandbox` group to the `openenv` app."""
    app.command("build")(build)
    app.add_typer(sandbox_app, name="sandbox")
