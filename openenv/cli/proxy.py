"""`openenv proxy`: run the capture proxy standalone in the foreground."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
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
) -> None:
    """Serve the capture proxy; open sessions with POST /sessions, read them back from /sessions/{token}."""
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
    config = uvicorn.Config(create_app(manager, freeze_gc=True), host=host, port=port, log_level="info")
    server = uvicorn.Server(config)

    async def main() -> None:
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.05)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            base = f"http://{host}:{bound}"
            typer.echo(f"capture proxy on {base} (backend {chosen.name}); POST {base}/sessions to open a session")
            if session_token:
                session = manager.open(base_url=base, token=session_token)
                typer.echo(f"session base_url: {session.base_url}")
        await serving

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:  # uvloop when installed
        runner.run(main())


def _backend(kind: str, model: Path, upstream: str | None) -> Backend:
    from openenv.capture.backends import LocalBackend, VLLMBackend

    if kind == "vllm" and upstream:
        return VLLMBackend(upstream)
    return LocalBackend(model)


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy)
