"""`openenv proxy`: run the capture proxy standalone in the foreground.

Safe by default for a process other programs can reach: the admin API (open, list, read and close
sessions) needs a bearer key, generated at start and printed once unless one is given, and it listens on
a port of its own, so a harness that knows the model port cannot reach it. Every turn is journaled to
disk before its reply (`openenv journal rebuild` turns a journal back into training sequences), sessions
idle for an hour are closed, and SIGTERM ends the process within `--shutdown-timeout` seconds even
while a turn is generating.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from openenv.core.auth import is_loopback_host

if TYPE_CHECKING:
    import uvicorn

__all__ = ["default_journal_dir", "proxy", "register"]


def default_journal_dir() -> Path:
    """`$OPENENV_JOURNAL_DIR`, else `$XDG_STATE_HOME/openenv/journal` (`~/.local/state/openenv/journal`)."""
    if os.environ.get("OPENENV_JOURNAL_DIR"):
        return Path(os.environ["OPENENV_JOURNAL_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "openenv" / "journal"


def proxy(
    model: Annotated[
        Path | None,
        typer.Option(
            help="model folder: its tokenizer and chat template render prompts (default: the tiny model, as every "
            "other command)"
        ),
    ] = None,
    backend: Annotated[str, typer.Option(help="local (in-process transformers) or vllm")] = "local",
    vllm_url: Annotated[
        str | None,
        typer.Option(
            help="vLLM base URL (without /v1), for --backend vllm; several, comma-separated, spread sessions "
            "over engines"
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0 picks a free one)")] = 0,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    parser: Annotated[str, typer.Option(help="tool-call parser: hermes, ...")] = "hermes",
    served_model: Annotated[str, typer.Option(help="model name listed by /v1/models")] = "tiny",
    temperature: Annotated[float | None, typer.Option(help="override every harness's temperature")] = None,
    session_token: Annotated[str | None, typer.Option(help="open one auto session with this token")] = None,
    admin_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENENV_CAPTURE_ADMIN_KEY",
            show_envvar=True,
            help="the bearer key of the admin API (/sessions...); default: a new random key, printed once. Prefer "
            "the env var, which ps does not show",
        ),
    ] = None,
    no_admin_key: Annotated[
        bool,
        typer.Option("--no-admin-key", help="serve the admin API without a key (only on a loopback --host)"),
    ] = False,
    admin_port: Annotated[
        int | None,
        typer.Option(
            help="the admin API's own port (default: a free one, printed at start); the model port then "
            "answers 404 for /sessions"
        ),
    ] = None,
    admin_on_model_port: Annotated[
        bool,
        typer.Option(
            "--admin-on-model-port", help="serve the admin API on the model port too (one port for both)"
        ),
    ] = False,
    journal_dir: Annotated[
        Path | None,
        typer.Option(
            help="where each session's turns are journaled before replying (default: $OPENENV_JOURNAL_DIR or "
            "~/.local/state/openenv/journal)"
        ),
    ] = None,
    journal: Annotated[bool, typer.Option(help="journal turns to disk (--no-journal: memory only)")] = True,
    journal_fsync: Annotated[
        bool,
        typer.Option(
            help="fsync each turn before its reply (--no-journal-fsync: survives a killed proxy, not a power "
            "loss, and saves a disk wait per turn)"
        ),
    ] = True,
    max_tokens_default: Annotated[
        int,
        typer.Option(
            help="output budget of a request that names no max_tokens (0: up to the context window)"
        ),
    ] = 8192,
    turn_timeout: Annotated[
        float, typer.Option(help="wall-clock seconds one turn may generate (0: none)")
    ] = 600.0,
    max_turns: Annotated[int, typer.Option(help="turns one session may store (0: no cap)")] = 10_000,
    max_sessions: Annotated[
        int, typer.Option(help="sessions open at once; more get a capacity error")
    ] = 4096,
    idle_timeout: Annotated[
        float, typer.Option(help="close a session after this many seconds without a request (0: never)")
    ] = 3600.0,
    max_body_mb: Annotated[float, typer.Option(help="request bodies over this many MiB get a 413")] = 32.0,
    release_idle: Annotated[
        float,
        typer.Option(
            help="once every session has closed, seconds idle before the caches are emptied and freed "
            "memory is handed back to the OS (0: never)"
        ),
    ] = 5.0,
    shutdown_timeout: Annotated[
        float,
        typer.Option(help="on SIGTERM/Ctrl-C, seconds to let turns in flight finish before cancelling them"),
    ] = 5.0,
    upstream: Annotated[
        str | None, typer.Option("--upstream", hidden=True, help="deprecated spelling of --vllm-url")
    ] = None,
    access_log: Annotated[
        bool,
        typer.Option(
            help="log a line per request (off by default: at hundreds of turns/s it costs CPU per turn)"
        ),
    ] = False,
) -> None:
    """Serve the capture proxy; open sessions with POST /sessions on the admin port, read them back there.

    Harnesses get only their session's base URL (/s/TOKEN) on the model port. The admin API is on its
    own port with a bearer key unless you pass --admin-on-model-port / --no-admin-key.
    """
    from openenv.capture.backends.named import BACKEND_NAMES
    from openenv.capture.backends.vllm_engines import split_urls
    from openenv.capture.engine import EngineSpec

    if upstream is not None:
        typer.echo("warning: --upstream is deprecated; use --vllm-url", err=True)
        vllm_url = vllm_url or upstream
    if backend not in BACKEND_NAMES:
        raise typer.BadParameter(
            f"unknown backend {backend!r}; use {' or '.join(BACKEND_NAMES)}", param_hint="--backend"
        )
    if backend == "vllm" and not vllm_url:
        raise typer.BadParameter("--backend vllm needs --vllm-url http://HOST:PORT", param_hint="--vllm-url")
    if no_admin_key and not is_loopback_host(host):
        raise typer.BadParameter(
            f"--no-admin-key is refused on --host {host}: anyone who reaches it could read "
            "every session; give --admin-key instead",
            param_hint="--no-admin-key",
        )
    if admin_on_model_port and admin_port is not None:
        raise typer.BadParameter(
            "--admin-port and --admin-on-model-port exclude each other", param_hint="--admin-port"
        )
    import asyncio

    import uvicorn

    from openenv.capture.app import create_app
    from openenv.capture.canonical import SamplingParams
    from openenv.capture.registry import CaptureSessionRegistry
    from openenv.capture.renderer import Renderer
    from openenv.capture.session import TurnLimits

    if model is None:
        from openenv.models import tiny_model_path

        model = tiny_model_path()
    generated = admin_key is None and not no_admin_key
    key = None if no_admin_key else (admin_key or secrets.token_urlsafe(24))
    chosen = EngineSpec(backend, str(model), split_urls(vllm_url)).make_backend()
    sampling = SamplingParams(temperature=temperature) if temperature is not None else None
    limits = TurnLimits(
        max_new_tokens_default=max_tokens_default or None,
        turn_timeout_s=turn_timeout or None,
        max_turns=max_turns or None,
    )
    folder = (journal_dir or default_journal_dir()) if journal else None
    registry = CaptureSessionRegistry(
        renderer=Renderer.from_pretrained(model),
        backend=chosen,
        parser=parser,
        served_model=served_model,
        sampling=sampling,
        max_sessions=max_sessions,
        journal_dir=folder,
        journal_fsync=journal_fsync,
        limits=limits,
        idle_timeout_s=idle_timeout or None,
        release_idle_s=release_idle or None,
    )
    split = not admin_on_model_port
    cap = int(max_body_mb * 1024 * 1024)
    app = create_app(
        registry, freeze_gc=True, admin_key=key, routes="model" if split else "all", max_body_bytes=cap
    )
    servers = [uvicorn.Server(_config(app, host, port, access_log, shutdown_timeout))]
    if split:
        admin_app = create_app(registry, admin_key=key, routes="admin", max_body_bytes=cap)
        servers.append(
            uvicorn.Server(_config(admin_app, host, admin_port or 0, access_log, shutdown_timeout))
        )

    async def main() -> None:
        serving = asyncio.gather(*(s.serve() for s in servers))
        while not all(s.started for s in servers) and not serving.done():
            await asyncio.sleep(0.05)
        if all(s.started for s in servers):
            base, admin = _urls(host, servers)
            if split:
                admin_app.state.model_base_url = base
            typer.echo(
                f"capture proxy on {base} (backend {chosen.name}); POST {admin}/sessions to open a session"
                + (" (with Authorization: Bearer <admin key>)" if key else "")
            )
            if generated:
                typer.echo(f"admin key (shown once; set OPENENV_CAPTURE_ADMIN_KEY to choose it): {key}")
            typer.echo(
                f"journal: {folder} (fsync {'on' if journal_fsync else 'off'})"
                if folder is not None
                else "journal: off (turns live in memory only)"
            )
            if session_token:
                session = registry.open(base_url=base, token=session_token)
                typer.echo(f"session base_url: {session.base_url}")
        await serving

    with asyncio.Runner(loop_factory=servers[0].config.get_loop_factory()) as runner:  # uvloop when installed
        runner.run(main())


def _config(app: object, host: str, port: int, access_log: bool, shutdown_timeout: float) -> uvicorn.Config:
    import uvicorn

    # timeout_graceful_shutdown: past it uvicorn cancels the requests still running; a cancelled turn
    # aborts its generation (vLLM request or local thread), so the process exits within the bound.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=access_log,
        timeout_graceful_shutdown=max(int(shutdown_timeout), 1),
    )


def _urls(host: str, servers: list[uvicorn.Server]) -> tuple[str, str]:
    """The model routes' base URL and the admin API's (the same unless a second server holds it)."""
    urls = [f"http://{host}:{s.servers[0].sockets[0].getsockname()[1]}" for s in servers]
    return urls[0], urls[-1]


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy)
