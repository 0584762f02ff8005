"""The viewer's web app: one page per episode, rendered on the server (no JavaScript needed).

Serve it with `openenv.server.LocalServer` (127.0.0.1, a free port), behind the env server's token, Host
and Origin checks (`guard.py`; open `viewer_url(server)` in a browser). Episodes come from trajectory
files, or live from a capture proxy's admin API; each request re-reads its source, so reloading the page
shows a running session's newest turns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import jinja2
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from openenv.export.log import EpisodeLog
from openenv.server.security import ServerSecurity
from openenv.viewer.guard import ViewerGuard
from openenv.viewer.model import Decode, EpisodeView, build_view

__all__ = ["EpisodeSource", "create_viewer_app", "tokenizer_decode", "viewer_url"]

EpisodeSource = Callable[[], list[EpisodeLog]]
_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def tokenizer_decode(model: str | Path) -> Decode:
    """Decode single token ids with the model's own tokenizer (cached: ids repeat a lot)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))

    @functools.lru_cache(maxsize=65536)
    def decode(token: int) -> str:
        return str(tokenizer.decode([token]))

    return decode


def create_viewer_app(
    source: EpisodeSource, decode: Decode, *, security: ServerSecurity | None = None
) -> FastAPI:
    """The viewer app: `/` lists the episodes, `/episodes/{i}` shows one, `/api/episodes/{i}` as JSON.

    `security`: its token, Host and Origin rules guard every route (default: a fresh random token and
    the loopback names); `app.state.security` holds it, so `LocalServer` knows the token.
    """
    app = FastAPI(title="openenv trajectory viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.security = security or ServerSecurity()
    app.add_middleware(ViewerGuard, security=app.state.security)

    def views() -> list[EpisodeView]:
        return [build_view(log, decode) for log in source()]

    def pick(index: int) -> tuple[list[EpisodeView], EpisodeView]:
        episodes = views()
        if not 0 <= index < len(episodes):
            raise HTTPException(404, f"no episode {index}; there are {len(episodes)}")
        return episodes, episodes[index]

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        episodes = views()
        if len(episodes) == 1:
            return _render(episodes, episodes[0], 0)
        return _TEMPLATES.get_template("index.html").render(episodes=episodes)

    @app.get("/episodes/{index}", response_class=HTMLResponse)
    def episode(index: int) -> str:
        episodes, view = pick(index)
        return _render(episodes, view, index)

    @app.get("/api/episodes/{index}")
    def episode_json(index: int) -> EpisodeView:
        return pick(index)[1]

    return app


def viewer_url(base_url: str, security: ServerSecurity) -> str:
    """The address to open in a browser: the first visit carries the token, a cookie keeps it."""
    return f"{base_url}/?token={security.token}" if security.token else f"{base_url}/"


def _render(episodes: list[EpisodeView], view: EpisodeView, index: int) -> str:
    return _TEMPLATES.get_template("episode.html").render(episodes=episodes, ep=view, current=index)
