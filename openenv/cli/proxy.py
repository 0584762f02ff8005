"""`openenv proxy`: run the capture proxy standalone in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    import uvicorn

    from openenv.capture.backends.base import Backend

__all__ = ["register"]


def proxy(
    model: Annotated[Path, typer.Option(help="model folder: its tokenizer and chat template render prompts")],
    backend: Annotated[str, typer.Option(help="local (in-process transformers) or vllm")] = "local",
    upstream: Annotated[str | None, typer.Option(help="vLLM base URL (without /v1), for --backend vllm")] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0 picks a free one)")] = 0,
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    parser: Annotated[str, typer.Option(help="tool-call parser: hermes, ...")] = "hermes",
    served_model: Annotated[str, typer.Option(help="model name listed by /v1/models")] = "tiny",
    temperature: Annotated[float | None, typer.Option(help="override every harness's temperature")] = None,
    session_token: Annotated[str | None, typer.Option(help="open one auto session with this token")] = None,
    admin_key: Annotated[str | None, typer.Option(
        envvar="OPENENV_CAPTURE_ADMIN_KEY", show_envvar=True,
        help="require 'Authorization: Bearer KEY' on the admin API (/sessions...); prefer the env var, "
             "which ps does not show")] = None,
    admin_port: Annotated[int | None, typer.Option(
        help="serve the admin API (/sessions...) on this port only (0 picks one); the main port then "
             "serves only the model routes and answers 404 for /sessions")] = None,
    access_log: Annotated[bool, typer.Option(
        help="log a line per request (off by default: at hundreds of turns/s it costs CPU per turn)")] = False,
) -> None:
    """Serve the capture proxy; open sessions with POST /sessions, read them back from /sessions/{token}.

    Harnesses get only their session's base URL (/s/TOKEN). Keep the admin API from them with
    --admin-key (a bearer key) and/or --admin-port (a port of its own).
    """
    if backend not in ("local", "vllm"):
        raise typer.BadParameter(f"unknown backend {backend!r}; use local or vllm", param_hint="--backend")
    if backend == "vllm" and not upstream:
        raise typer.BadParameter("--backend vllm needs --upstream http://HOST:PORT", param_hint="--upstream")
    import asyncio

    import uvicorn

    from openenv.capture.app import create_app
    from openenv.capture.canonical import SamplingParams
    from openenv.capture.renderer import Renderer
    from openenv.capture.sessions import SessionManager

    chosen = _backend(backend, model, upstream)
    sampling = SamplingParams(temperature=temperature) if temperature is not None else None
    manager = SessionManager(renderer=Renderer.from_pretrained(model), backend=chosen, parser=parser,
                             served_model=served_model, sampling=sampling)
    split = admin_port is not None
    app = create_app(manager, freeze_gc=True, admin_key=admin_key, routes="model" if split else "all")
    config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=access_log)
    servers = [uvicorn.Server(config)]
    if admin_port is not None:
        admin_app = create_app(manager, admin_key=admin_key, routes="admin")
        servers.append(uvicorn.Server(uvicorn.Config(admin_app, host=host, port=admin_port, log_level="info",
                                                                access_log=access_log)))

    async def main() -> None:
        serving = asyncio.gather(*(s.serve() for s in servers))
        while not all(s.started for s in servers) and not serving.done():
            await asyncio.sleep(0.05)
        if all(s.started for s in servers):
            base, admin = _urls(host, servers)
            if split:
                admin_app.state.model_base_url = base
            typer.echo(f"capture proxy on {base} (backend {chosen.name}); POST {admin}/sessions to open a session"
                       + (" (with Authorization: Bearer <admin key>)" if admin_key else ""))
            if session_token:
                session = manager.open(base_url=base, token=session_token)
                typer.echo(f"session base_url: {session.base_url}")
        await serving

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:  # uvloop when installed
        runner.run(main())


def _urls(host: str, servers: list[uvicorn.Server]) -> tuple[str, str]:
    """The model routes' base URL and the admin API's (the same unless a second server holds it)."""
    urls = [f"http://{host}:{s.servers[0].sockets[0].getsockname()[1]}" for s in servers]
    return urls[0], urls[-1]


def _backend(kind: str, model: Path, upstream: str | None) -> Backend:
    from openenv.capture.backends import LocalBackend, VLLMBackend

    if kind == "vllm" and upstream:
        return VLLMBackend(upstream)
    return LocalBackend(model)


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy)
