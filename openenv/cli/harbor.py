"""`openenv serve harbor`: the Harbor env road (the reference's `HarborEnv`, TRL's harness trainer).

`openenv serve` hands its arguments here when the env is `harbor`; the options below are this road's
own (`openenv serve harbor --help` lists them beside serve's). See docs/interop.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["HARBOR_HELP", "serve_harbor"]

console = Console()
harbor_app = typer.Typer(add_completion=False)
HARBOR_HELP = (
    "`harbor` serves the Harbor env road (the reference's HarborEnv, TRL's harness trainer) and takes: "
    "--tasks SPEC (repeat: one split each), --max-rollouts N, --allow-llm-url URL (repeat), --backend, "
    "--model, --vllm-url, --oracle-harness, --open-discovery/--token-discovery, --runs-dir, --max-tokens, "
    "--temperature, --image-substitute; `openenv serve harbor --tasks X --help-harbor` explains each."
)


def _default_rollouts() -> int:
    """What this machine sustains: one episode (a harness, a sandbox, a verifier) per two cores."""
    return max(1, (os.cpu_count() or 2) // 2)


@harbor_app.command()
def _options(
    tasks: Annotated[
        list[str],
        typer.Option(
            "--tasks",
            help="a task set (a Harbor task folder or folder of them, "
            "`builtin`, a parquet/jsonl file, a Hub id); repeat: one split each",
        ),
    ],
    max_rollouts: Annotated[
        int | None,
        typer.Option(min=1, help="rollouts at once; later ones queue (default: one per two cores)"),
    ] = None,
    allow_llm_url: Annotated[
        list[str] | None,
        typer.Option(help="an engine URL a rollout's llm_url may name besides this server's own (repeat)"),
    ] = None,
    backend: Annotated[str, typer.Option(help="local (in-process transformers) or vllm")] = "local",
    model: Annotated[Path | None, typer.Option(help="model folder (default: the tiny model)")] = None,
    vllm_url: Annotated[
        str | None, typer.Option(help="vLLM base URL(s), comma-separated (default $OPENENV_VLLM_URL)")
    ] = None,
    oracle_harness: Annotated[
        str,
        typer.Option(
            help="the harness that plays harness='oracle' (the task's solution/solve.sh, as --policy oracle)"
        ),
    ] = "pi",
    open_discovery: Annotated[
        bool | None,
        typer.Option(
            "--open-discovery/--token-discovery",
            help="serve the Task API without the token (default: open on a loopback bind, token elsewhere)",
        ),
    ] = None,
    runs_dir: Annotated[Path, typer.Option(help="each episode's JSONL log goes here")] = Path(
        "artifacts/harbor-runs"
    ),
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1, help="default output cap per turn (a rollout's sampling.max_tokens overrides it)"
        ),
    ] = None,
    temperature: Annotated[float | None, typer.Option(min=0.0, help="default temperature")] = None,
    image_substitute: Annotated[
        list[str] | None,
        typer.Option(
            "--image-substitute",
            help="FROM=TO: run a Docker task whose image FROM is not in the engine on TO (as "
            "`openenv run`); repeatable",
        ),
    ] = None,
    help_harbor: Annotated[bool, typer.Option("--help-harbor", help="show this help")] = False,
) -> dict[str, Any]:
    return dict(locals())


def _parse(args: list[str]) -> dict[str, Any]:
    command = typer.main.get_command(harbor_app)
    if "--help-harbor" in args:
        with click.Context(command, info_name="openenv serve harbor") as ctx:
            typer.echo(command.get_help(ctx))
        raise typer.Exit(0)
    try:
        return command.main(args, prog_name="openenv serve harbor", standalone_mode=False)  # type: ignore[no-any-return]  # click's main returns Any; standalone_mode=False returns the command's int
    except click.UsageError as exc:
        console.print(f"[red]error:[/red] {escape(exc.format_message())}")
        raise typer.Exit(2) from None


def serve_harbor(
    args: list[str],
    *,
    host: str,
    port: int | None,
    token: str | None,
    no_token: bool,
    allowed_hosts: list[str],
    allowed_origins: list[str],
    max_body_bytes: int,
    max_sessions: int,
    idle_timeout_s: float | None,
) -> None:
    """Load the splits, check the engine, and serve until interrupted."""
    import uvicorn

    from openenv.capture.engine import EngineSpec
    from openenv.cli._serving import token_file_while_serving
    from openenv.core.auth import TOKEN_ENV, is_loopback_host, token_file
    from openenv.errors import OpenEnvError
    from openenv.harbor_server import HarborService, RolloutPolicy, Splits, build_harbor_app
    from openenv.harness.catalog import get_spec
    from openenv.harness.episode_settings import DEFAULT_SAMPLING
    from openenv.server.security import ServerSecurity

    opts = _parse(args)
    port = port or 8000
    try:
        engine = EngineSpec.of(opts["backend"], model=opts["model"], vllm_url=opts["vllm_url"])
        engine.check()
        get_spec(opts["oracle_harness"])
        splits = Splits.load(opts["tasks"])
        security = ServerSecurity.for_bind(
            host,
            token=token or os.environ.get(TOKEN_ENV) or None,
            no_token=no_token,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            max_body_bytes=max_body_bytes,
        )
    except OpenEnvError as exc:
        console.print(f"[red]error:[/red] {escape(exc.message)}")
        raise typer.Exit(2) from None
    sampling = DEFAULT_SAMPLING.model_copy(
        update={
            k: v
            for k, v in (("max_tokens", opts["max_tokens"]), ("temperature", opts["temperature"]))
            if v is not None
        }
    )
    allowed = tuple(u.strip() for u in opts["allow_llm_url"] or [] if u.strip())
    substitutes: dict[str, str] = {}
    if opts["image_substitute"]:
        from openenv.harness.sandbox.images import parse_substitutes

        substitutes = parse_substitutes(opts["image_substitute"])
    policy = RolloutPolicy(
        engine=engine,
        allowed_llm_urls=allowed,
        oracle_harness=opts["oracle_harness"],
        default_sampling=sampling,
        image_substitutes=tuple(substitutes.items()),
    )
    rollouts = opts["max_rollouts"] or _default_rollouts()
    service = HarborService(splits=splits, policy=policy, max_rollouts=rollouts, runs_dir=opts["runs_dir"])
    open_discovery = is_loopback_host(host) if opts["open_discovery"] is None else opts["open_discovery"]
    app = build_harbor_app(
        service,
        security=security,
        open_discovery=open_discovery,
        max_sessions=max(max_sessions, rollouts),
        idle_timeout_s=idle_timeout_s,
    )
    console.print(
        f"serving [bold]harbor_env[/bold] on http://{host}:{port}: "
        + ", ".join(f"{escape(s['name'])} ({s['num_tasks']} tasks)" for s in splits.listing())
        + f"; {rollouts} rollout(s) at once; engine {engine.backend} {escape(str(engine.folder()))}",
        soft_wrap=True,
        highlight=False,
    )
    console.print(
        f"Task API ({'no token' if open_discovery else 'token'}) at /harbor_env/splits; rollouts: MCP "
        "run_rollout over /ws and /mcp (token)",
        highlight=False,
    )
    if allowed:
        console.print("rollouts may also name: " + ", ".join(escape(u) for u in allowed), highlight=False)
    if security.token is None:
        console.print("[yellow]no token[/yellow]: any program on this machine can run rollouts")
    else:
        console.print(
            f"token: {security.token}\n  (clients send 'Authorization: Bearer <token>'; this user's "
            f"clients on this machine read it from {token_file(port)}; others: export "
            f"{TOKEN_ENV}=<token>)",
            highlight=False,
            soft_wrap=True,
        )
        token_file_while_serving(app, port, security.token)
    with service.pool:  # the server's capture servers end with it
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            ws="websockets-sansio",
            ws_max_size=max(security.max_frame_bytes, 256 * 2**20),
        )
