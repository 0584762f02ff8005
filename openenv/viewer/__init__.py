"""The trajectory viewer: an episode's turns, messages, tool calls, tokens and sequences on one web page.

`model` turns an episode log into a view (pure, given a token decoder); `app` serves it with FastAPI.
"""

from __future__ import annotations

from openenv.viewer.app import create_viewer_app, tokenizer_decode, viewer_url
from openenv.viewer.model import EpisodeView, build_view, load_proxy_session

__all__ = [
    "EpisodeView",
    "build_view",
    "create_viewer_app",
    "load_proxy_session",
    "tokenizer_decode",
    "viewer_url",
]
