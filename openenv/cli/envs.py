"""`openenv serve | list | init | validate`: the environment commands of the CLI.

Heavy imports stay inside the command bodies so `openenv --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]

console = Console()


def serve(
    env: Annotated[str, typer.Argument(help="Env name (installed or under envs/) or env folder.")],
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option(help="Live sessions allowed at once.")] = 64,
    idle_timeout: Annotated[
        float, typer.Option(help="Close sessions idle this many seconds (0: never).")
    ] = 600.0,
) -> None:
    """Serve an environment over HTTP and WebSocket until interrupted."""
    import uvicorn

    from openenv.auto import load_env, resolve
    from openenv.errors import OpenEnvError
    from openenv.server import create_app

    try:
        source = resolve(env)
        if source.kind not in ("entry_point", "folder"):
            raise typer.BadParameter(
                f"{env!r} is a {source.kind}, which is served elsewhere; give an env name"
            )
        loaded = load_env(source)
    except OpenEnvError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    app = create_app(
        loaded.env_class,
        metadata=loaded.metadata,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout or None,
    )
    console.print(f"serving [bold]{source.name}[/bold] ({source.target}) on http://{host}:{port}")
    uvicorn.run(app, host=host, port=port, log_level="warning", ws="websockets-sansio")


def list_envs() -> None:
    """List the environments that can be served or made by name."""
    from openenv.auto import discover_envs

    table = Table("name", "source", "where")
    for source in discover_envs():
        table.add_row(escape(source.name), source.kind, escape(source.target))
    console.print(table)


def init(
    name: Annotated[str, typer.Argument(help="Lowercase identifier; the package becomes NAME_env.")],
    dest: Annotated[Path, typer.Option("--dir", help="Parent folder for the new env.")] = Path("."),
) -> None:
    """Scaffold a new environment folder that passes `openenv validate` and its own tests."""
    from openenv.errors import OpenEnvError
    from openenv.scaffold import scaffold

    try:
        root = scaffold(name, dest)
    except OpenEnvError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    console.print(f"created [bold]{root}[/bold]; next: cd {root} && python -m pytest && openenv validate .")


def validate(
    path: Annotated[Path | None, typer.Argument(help="Env folder to check statically.")] = None,
    url: Annotated[str | None, typer.Option(help="Running env server to check live.")] = None,
) -> None:
    """Check an env folder and/or a running server; exits 1 naming every failed check."""
    from openenv.validate import validate_folder, validate_url

    if path is None and url is None:
        path = Path(".")
    checks = (validate_folder(path) if path is not None else []) + (validate_url(url) if url else [])
    table = Table("check", "result", "detail")
    for check in checks:
        table.add_row(
            check.name, "[green]pass[/green]" if check.ok else "[red]FAIL[/red]", escape(check.message)
        )
    console.print(table)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed:[/red] {', '.join(failed)}")
        raise typer.Exit(1)
    console.print(f"[green]all {len(checks)} checks passed[/green]")


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command("list")(list_envs)
    app.command()(init)
    app.command()(validate)
