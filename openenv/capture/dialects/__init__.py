"""Dialects: one package per wire format, and the one registry mapping routes to them.

A new dialect is a package with `protocol.py` + `convert.py` (see `openai_chat/`) plus one line per
route below. Keys are `"METHOD /path"` with Starlette `{param}` placeholders; the app serves every
route both under `/s/{token}` (path routing) and at the root (token in the API-key header).
"""

from __future__ import annotations

from openenv.capture.dialects.base import Dialect, Endpoint, RequestContext, ServerSentEvent
from openenv.capture.dialects.openai_chat import OpenAIChatDialect

__all__ = ["ROUTES", "Dialect", "Endpoint", "RequestContext", "ServerSentEvent", "default_dialect"]

_openai_chat = OpenAIChatDialect()

ROUTES: dict[str, Endpoint] = {
    "POST /v1/chat/completions": Endpoint(_openai_chat),
    "GET /v1/models": Endpoint(_openai_chat, "models"),
}


def default_dialect() -> Dialect:
    """The dialect that renders errors for requests no route claims (OpenAI's format)."""
    return _openai_chat
