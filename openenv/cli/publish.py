"""`openenv push`: publish an env folder as a Hugging Face Docker Space (or write the folder with --dry-run)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["push", "register"]

_err = Console(stderr=True)


def push(
    env: Annotated[str, typer.Argument(help="env name (under envs/) or env folder")] = ".",
    repo: Annotated[
        str | None, typer.Option(help="Space id owner/name (default: <your user>/<env name>)")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="write the Space folder locally, upload nothing")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            help="where the Space folder goes: a new or empty folder (default: "
            "build/space-<env> for --dry-run, else a temporary folder)"
        ),
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option(help="Hub URL (default $HF_ENDPOINT or huggingface.co)")
    ] = None,
    private: Annotated[
        bool,
        typer.Option(
            "--private/--public",
            help="create the Space private (default) or public: "
            "anyone can read its files and reach /health; episodes still need "
            "the OPENENV_TOKEN secret, without which it does not start",
        ),
    ] = True,
) -> None:
    """Publish an env as a Docker Space: README front matter (sdk: docker, app_port), Dockerfile and code.

    Only files git would take are copied (.gitignore honoured) and never dotfiles (.env, .git); the Space
    is private unless --public; its server requires a token (set the Space secret OPENENV_TOKEN). The
    Space's root is also the pip-installable client package `openenv-<name>_env` that the reference
    OpenEnv's AutoEnv.from_env("owner/name") installs (it reaches public Spaces only).
    """
    import tempfile

    from openenv.errors import OpenEnvError
    from openenv.manifest import Manifest
    from openenv.publish import build_space_folder, push_space

    scratch = None
    if out is None and not dry_run:
        scratch = Path(tempfile.mkdtemp(prefix="openenv-space-"))  # ours: removed after the upload
    try:
        dest = out or scratch or Path("build") / f"space-{Path(env).resolve().name}"
        folder = build_space_folder(env, dest, repo_id=repo, public=not private)
        _say_what_was_left_out(env)
        if dry_run:
            typer.echo(f"Space folder written to {folder} (dry run: nothing uploaded)")
            return
        name = Manifest.load(folder / "env")[0].name
        repo_id = repo or f"{_whoami(endpoint)}/{name}"
        url = push_space(folder, repo_id, endpoint=endpoint or os.environ.get("HF_ENDPOINT"), private=private)
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    visibility = "private" if private else "public"
    typer.echo(
        f"pushed {repo_id} ({visibility}); the env serves at {url} (AutoEnv.from_env({repo_id!r})); "
        "set the Space secret OPENENV_TOKEN and export the same value where clients run"
    )


def _say_what_was_left_out(env: str) -> None:
    """Name what the Space does not carry, so a file missing from it is not a mystery."""
    from openenv.publish import env_folder, space_files

    folder = env_folder(env)
    if (folder / "spec.yaml").is_file():
        return  # a harness env's Space is its image context, not a copy of the folder
    left = space_files(folder).left_out
    if left:
        shown = "; ".join(f"{path} ({why})" for path, why in left[:8])
        more = f"; +{len(left) - 8} more" if len(left) > 8 else ""
        _err.print(f"left out of the Space: {shown}{more}", highlight=False, soft_wrap=True)


def _whoami(endpoint: str | None) -> str:
    from huggingface_hub import HfApi

    return str(HfApi(endpoint=endpoint).whoami()["name"])


def register(app: typer.Typer) -> None:
    app.command("push")(push)
