"""`openenv view`: serve the trajectory viewer on 127.0.0.1 for trajectory files or a live proxy session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from openenv.export import EpisodeLog

__all__ = ["register", "view"]

_err = Console(stderr=True)


def view(
    trajectory: Annotated[
        list[Path] | None, typer.Argument(help="trajectory .jsonl files or folders")
    ] = None,
    proxy: Annotated[
        str | None, typer.Option(help="a capture proxy's base URL, to view a live session")
    ] = None,
    session: Annotated[str | None, typer.Option(help="the session token to view (with --proxy)")] = None,
    admin_key: Annotated[
        str | None,
        typer.Option(
            envvar="OPENENV_CAPTURE_ADMIN_KEY", help="the proxy's admin key, if it was started with one"
        ),
    ] = None,
    model: Annotated[
        Path | None, typer.Option(help="tokenizer folder for token text (default: tiny model)")
    ] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: a free one)")] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="open the page in a browser")] = False,
) -> None:
    """Show turns, messages, tool calls and results, logprob-coloured tokens with env_mask, the reward
    breakdown, and the training sequences with their merge ratio and breaks."""
    from openenv.errors import OpenEnvError
    from openenv.export import find_logs, read_episode
    from openenv.models import tiny_model_path
    from openenv.server import LocalServer
    from openenv.viewer import create_viewer_app, load_proxy_session, tokenizer_decode, viewer_url

    if (proxy is None) == (not trajectory):
        _err.print("[red]error:[/] give trajectory files, or --proxy URL --session TOKEN (not both)")
        raise typer.Exit(2)
    if proxy is not None and session is None:
        _err.print("[red]error:[/] --proxy needs --session TOKEN (the session's token from POST /sessions)")
        raise typer.Exit(2)
    try:
        files = find_logs(trajectory) if trajectory else []

        def source() -> list[EpisodeLog]:
            if proxy is not None and session is not None:
                return [load_proxy_session(proxy, session, admin_key=admin_key)]
            return [read_episode(f) for f in files]

        source()  # fail now, not on the first page load
        decode = tokenizer_decode(model or tiny_model_path())
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None
    app = create_viewer_app(source, decode)
    server = LocalServer(app, port=port).start()
    url = viewer_url(server.base_url, app.state.security)
    typer.echo(f"viewer at {url} (Ctrl-C to stop; the token in it is the only way in)")
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    app.command("view")(view)
