"""`openenv build [HARNESS|all]` and `openenv sandbox sweep`: harness images and Docker sandbox upkeep.

The Docker SDK is imported inside the command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    import docker

    from openenv.harness.spec import HarnessSpec

__all__ = ["build_image", "image_tag", "register"]

OFFLINE_BASE = os.environ.get("OPENENV_BASE_IMAGE", "openenv/base:latest")
sandbox_app = typer.Typer(help="Docker sandbox upkeep (orphaned containers from dead runs).",
                          no_args_is_help=True)
_out = Console(stderr=True)


def image_tag(spec: HarnessSpec) -> str:
    """`openenv/<harness>:<pinned version>`: the image `openenv build` makes for a harness."""
    return f"openenv/{spec.name}:{re.sub(r'[^A-Za-z0-9_.-]', '-', spec.install.version)}"


def _context(spec: HarnessSpec) -> Path | None:
    """The build context: the host's pinned npm install (installed first if missing); None for pip."""
    from openenv.harness.install import install, install_status, prefix

    if spec.install.method != "npm":
        return None
    if not install_status(spec).ready:
        _out.print(f"[bold]{spec.name}[/]: installing {spec.install.package}@{spec.install.version} on the host")
        install([spec.name])
    return prefix(spec)


def _default_base(client: docker.DockerClient, spec: HarnessSpec) -> str | None:
    """The offline base where it exists locally, else None (the Dockerfile's own public default)."""
    import docker.errors

    if spec.install.method != "npm":
        return None
    try:
        client.images.get(OFFLINE_BASE)
        return OFFLINE_BASE
    except docker.errors.ImageNotFound:
        return None


def build_image(
    client: docker.DockerClient, spec: HarnessSpec, *, base: str | None, network: str = "none"
) -> str:
    """Build `envs/<harness>/Dockerfile` and return its tag, printing build progress as it streams.

    Raises:
        EnvError: the Dockerfile is missing or the build failed (the message holds the engine's error).
    """
    from openenv.errors import EnvError
    from openenv.harness.catalog import envs_root

    dockerfile = envs_root() / spec.name / "Dockerfile"
    if not dockerfile.is_file():
        raise EnvError(f"{dockerfile} does not exist; harness {spec.name} has no image recipe")
    context = _context(spec) or dockerfile.parent
    tag = image_tag(spec)
    base = base or _default_base(client, spec)
    args: dict[str, Any] = {"buildargs": {"BASE_IMAGE": base}} if base else {}
    _out.print(f"[bold]{spec.name}[/]: building {tag} FROM {base or '(Dockerfile default)'}, context {context}")
    stream = client.api.build(path=str(context), dockerfile=str(dockerfile), tag=tag, rm=True, forcerm=True,
                              decode=True, network_mode=network, pull=False, **args)
    for chunk in stream:
        if "error" in chunk:
            raise EnvError(f"building {tag} failed: {chunk['error'].strip()}")
        line = str(chunk.get("stream", "")).rstrip()
        if line.startswith("Step ") or "Successfully" in line:
            _out.print(f"  {line}")
    return tag


def build(
    harness: Annotated[str, typer.Argument(help="a harness name from `openenv harness list`, or `all`")] = "all",
    base: Annotated[str | None, typer.Option(help="BASE_IMAGE; default: openenv/base if built, else the "
                                             "Dockerfile's public image")] = None,
    network: Annotated[str, typer.Option(help="build network; `none` keeps the build offline")] = "none",
) -> None:
    """Build the Docker image of one harness (or all) for `DockerSandbox`, from envs/<harness>/Dockerfile."""
    import docker

    from openenv.errors import OpenEnvError
    from openenv.harness.catalog import get_spec, harness_names
    from openenv.harness.sandbox.docker import engine_available

    if (reason := engine_available()) is not None:
        _out.print(f"[red]{reason}[/]")
        raise typer.Exit(1)
    names = harness_names() if harness == "all" else [harness]
    client = docker.from_env()
    failed = []
    for name in names:
        try:
            tag = build_image(client, get_spec(name), base=base, network=network)
            _out.print(f"[green]{name}: built {tag}[/]")
        except OpenEnvError as exc:
            _out.print(f"[red]{name}: {exc.message}[/]")
            failed.append(name)
    if failed:
        _out.print(f"[red]failed: {', '.join(failed)}[/]")
        raise typer.Exit(1)


@sandbox_app.command("sweep")
def sweep(
    everything: Annotated[bool, typer.Option("--all", help="remove every openenv sandbox, live owners too")] = False,
) -> None:
    """Remove containers, volumes and networks left by openenv processes that died without cleaning up."""
    import docker

    from openenv.harness.sandbox.docker import engine_available
    from openenv.harness.sandbox.sweeper import sweep as run_sweep

    if (reason := engine_available()) is not None:
        _out.print(f"[red]{reason}[/]")
        raise typer.Exit(1)
    report = run_sweep(docker.from_env(), everything=everything)
    Console().print(f"removed {len(report.containers)} containers, {len(report.volumes)} volumes, "
                    f"{len(report.networks)} networks, {len(report.folders)} episode folders")


def register(app: typer.Typer) -> None:
    """Add `build` and the `sandbox` group to the `openenv` app."""
    app.command("build")(build)
    app.add_typer(sandbox_app, name="sandbox")
