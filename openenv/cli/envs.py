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

__all__ = ["init", "init_next_step", "list_envs", "register", "serve", "validate"]

console = Console()


def serve(
    ctx: typer.Context,
    env: Annotated[
        str,
        typer.Argument(
            help="Env name (installed or under envs/) or env folder; `harbor`: the "
            "Harbor env road (see below)."
        ),
    ],
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(help="TCP port (default: the manifest's `port`, else 8000).", show_default=False),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option(
            help="For a folder whose openenv.yaml names an ASGI `app` (a reference OpenEnv env): the "
            "interpreter that runs it (default: $OPENENV_APP_PYTHON, else FOLDER/.venv, else this one).",
            show_default=False,
        ),
    ] = None,
    max_sessions: Annotated[int, typer.Option(help="Live sessions allowed at once.")] = 64,
    idle_timeout: Annotated[
        float, typer.Option(help="Close sessions idle this many seconds (0: never).")
    ] = 600.0,
    http_evict_after: Annotated[
        float,
        typer.Option(
            help="When full, close the HTTP session idle longest if idle this many seconds, "
            "to make room for a new client (0: never)."
        ),
    ] = 30.0,
    token: Annotated[
        str | None,
        typer.Option(
            help="Bearer token clients must send (default: $OPENENV_TOKEN, else a fresh random one, "
            "printed once and left in a 0600 file for this user's clients).",
            show_default=False,
        ),
    ] = None,
    no_token: Annotated[
        bool,
        typer.Option(
            "--no-token", help="Serve without a token: loopback addresses and loopback clients only."
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Another name the server answers to in Host (repeat; '*' for any), e.g. a Space's.",
            show_default=False,
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="A web origin whose pages may call the server (repeat), e.g. https://app.example.",
            show_default=False,
        ),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body / WebSocket frame.")] = 16 * 2**20,
    task_set: Annotated[
        list[str] | None,
        typer.Option(
            help="A task set clients may name by id besides builtin (repeat): a Harbor folder, a "
            "Harbor dataset NAME@VERSION ($OPENENV_HARBOR_REGISTRY), a parquet/jsonl file or a "
            "Hub id (harness envs; adds to $OPENENV_TASK_SETS).",
            show_default=False,
        ),
    ] = None,
    allow_inline_tasks: Annotated[
        bool,
        typer.Option(
            "--allow-inline-tasks",
            help="Let clients send whole tasks (their commands run here) "
            "instead of ids of this server's tasks. Trusted clients only.",
        ),
    ] = False,
) -> None:
    """Serve an environment over HTTP, WebSocket and MCP until interrupted.

    Every request but GET /health and the API docs needs `Authorization: Bearer <token>`; clients on this machine find the
    token themselves (`EnvClient`, `AutoEnv`), others read $OPENENV_TOKEN. See docs/security.md.

    A folder whose openenv.yaml names an ASGI `app` (made by the reference OpenEnv's `openenv init`) is run as
    its Dockerfile runs it, `uvicorn APP` from the folder, under --python; see docs/interop.md.

    `openenv serve harbor --tasks SPEC`: the Harbor env road (openenv/cli/harbor.py; --help-harbor).
    """
    import os

    if env == "harbor":
        from openenv.cli.harbor import serve_harbor

        serve_harbor(
            ctx.args,
            host=host,
            port=port,
            token=token,
            no_token=no_token,
            allowed_hosts=allowed_host or [],
            allowed_origins=allowed_origin or [],
            max_body_bytes=max_body_bytes,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout or None,
        )
        return
    if ctx.args:
        raise typer.BadParameter(
            f"unknown option(s) {' '.join(ctx.args)} (only `openenv serve harbor` takes more)"
        )

    import uvicorn

    from openenv.auto import load_env, resolve
    from openenv.cli._serving import token_file_while_serving
    from openenv.core.auth import TOKEN_ENV, token_file
    from openenv.errors import OpenEnvError
    from openenv.server import create_app
    from openenv.server.security import ServerSecurity

    if task_set:
        from openenv.harness.tasks.sets import SERVED_TASK_SETS_ENV

        listed = [
            os.environ.get(SERVED_TASK_SETS_ENV, ""),
            *(str(Path(t).resolve()) if Path(t).exists() else t for t in task_set),
        ]
        os.environ[SERVED_TASK_SETS_ENV] = ",".join(t for t in listed if t)
    try:
        source = resolve(env)
        if source.kind not in ("entry_point", "folder"):
            raise typer.BadParameter(
                f"{env!r} is a {source.kind}, which is served elsewhere; give an env name"
            )
        if source.kind == "folder":
            _serve_app_if_named(Path(source.target), host=host, port=port, python=python, token=token)
        port = port or 8000
        loaded = load_env(source)
        security = ServerSecurity.for_bind(
            host,
            token=token or os.environ.get(TOKEN_ENV) or None,
            no_token=no_token,
            allowed_hosts=allowed_host or (),
            allowed_origins=allowed_origin or (),
            max_body_bytes=max_body_bytes,
            allow_inline_tasks=allow_inline_tasks,
        )
    except OpenEnvError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    app = create_app(
        loaded.env_class,
        metadata=loaded.metadata,
        max_sessions=max_sessions,
        idle_timeout_s=idle_timeout or None,
        security=security,
        http_evict_after_s=http_evict_after or None,
    )
    console.print(f"serving [bold]{source.name}[/bold] ({source.target}) on http://{host}:{port}")
    if security.token is None:
        console.print("[yellow]no token[/yellow]: any program on this machine can drive the server")
    else:
        # A token the operator gave is never echoed: the log may be read by others (a public Space's is).
        shown = "(the one given, not shown)" if token or os.environ.get(TOKEN_ENV) else security.token
        console.print(
            f"token: {shown}\n  (clients send 'Authorization: Bearer <token>'; this user's "
            f"clients on this machine read it from {token_file(port)}; others: export "
            f"{TOKEN_ENV}=<token>)",
            highlight=False,
            soft_wrap=True,
        )
        token_file_while_serving(app, port, security.token)
    if security.allow_inline_tasks:
        console.print("[yellow]--allow-inline-tasks[/yellow]: clients may send tasks whose commands run here")
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        ws="websockets-sansio",
        ws_max_size=security.max_frame_bytes,
    )


def _serve_app_if_named(
    folder: Path, *, host: str, port: int | None, python: str | None, token: str | None
) -> None:
    """Become the folder's ASGI app server if its manifest names an `app` (never returns then); else return.

    The process is replaced (`exec`) by `PYTHON -m uvicorn APP`, so signals reach the server itself and
    nothing of ours stays in between. The app is the reference's: it checks no token of ours.
    """
    import os
    import sys

    from openenv.app_runner import APP_PYTHON_ENV, app_command, app_environ, find_python
    from openenv.core.auth import is_loopback_host
    from openenv.manifest import Manifest

    manifest, root = Manifest.load(folder)
    if not manifest.is_app:
        return
    if token:
        raise typer.BadParameter(f"{manifest.app} is the env's own app, which checks no token; drop --token")
    interpreter = find_python(root, python)
    command = app_command(manifest, root, interpreter, host=host, port=port or manifest.port)
    console.print(
        f"serving [bold]{manifest.name}[/bold] ({manifest.app} from {root}) on "
        f"http://{host}:{port or manifest.port} with {interpreter}",
        highlight=False,
        soft_wrap=True,
    )
    if interpreter == Path(sys.executable):
        console.print(
            f"[yellow]note[/yellow]: no --python, ${APP_PYTHON_ENV} or {root}/.venv, so this interpreter "
            "runs the app; one built on the reference OpenEnv needs an interpreter that has it"
        )
    if not is_loopback_host(host):
        console.print(
            "[yellow]no token[/yellow]: the env's own app has no authentication; anyone who reaches "
            f"{host} can drive it"
        )
    sys.stdout.flush()
    os.chdir(root)
    os.execve(interpreter, command, app_environ())


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
    console.print(
        f"created [bold]{escape(str(root))}[/bold]; next: {escape(init_next_step(root))}", soft_wrap=True
    )


def init_next_step(root: Path) -> str:
    """The command that runs the new env's tests and validates it, with this Python (the one that has
    openenv), installing pytest first where it is missing (a wheel install does not bring it)."""
    import importlib.util
    import shlex
    import sys

    python = shlex.quote(sys.executable)
    test = f"{python} -m pytest"
    if importlib.util.find_spec("pytest") is None:
        test = f"{python} -m pip install pytest && {test}"
    return f"cd {shlex.quote(str(root))} && {test} && {python} -m openenv.cli.main validate ."


def validate(
    path: Annotated[Path | None, typer.Argument(help="Env folder to check statically.")] = None,
    url: Annotated[str | None, typer.Option(help="Running env server to check live.")] = None,
    python: Annotated[
        str | None,
        typer.Option(
            help="For a folder that names an ASGI `app`: the interpreter that would serve it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check an env folder and/or a running server; exits 1 naming every failed check."""
    from openenv.validate import validate_folder, validate_url

    if path is None and url is None:
        path = Path(".")
    checks = (validate_folder(path, python=python) if path is not None else []) + (
        validate_url(url) if url else []
    )
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
    app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(serve)
    app.command("list")(list_envs)
    app.command()(init)
    app.command()(validate)
