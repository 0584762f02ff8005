"""Dialects: one package per wire format, and the one registry mapping routes to them.

A new dialect is a package with `protocol.py` + `convert.py` (see `openai_chat/`) plus one line per
route below. Keys are `"METHOD /path"` with Starlette `{param}` placeholders; the app serves every
route both under `/s/{token}` (path routing) and at the root (token in the API-key header).
"""

from __future__ import annotations

from typing import Any

from openenv.capture.dialects.anthropic import AnthropicDialect
from openenv.capture.dialects.base import Dialect, Endpoint, RequestContext, ServerSentEvent
from openenv.capture.dialects.gemini import GeminiDialect
from openenv.capture.dialects.openai_chat import OpenAIChatDialect
from openenv.capture.dialects.openai_responses import OpenAIResponsesDialect

__all__ = [
    "DIALECT_NAMES",
    "ROUTES",
    "Dialect",
    "Endpoint",
    "RequestContext",
    "ServerSentEvent",
    "default_dialect",
]

_openai_chat = OpenAIChatDialect()
_gemini, _gemini_stream = GeminiDialect(), GeminiDialect(stream=True)

ROUTES: dict[str, Endpoint] = {
    "POST /v1/chat/completions": Endpoint(_openai_chat),
    "GET /v1/models": Endpoint(_openai_chat, "models"),
    "POST /v1/responses": Endpoint(OpenAIResponsesDialect()),
    "POST /v1/messages": Endpoint(AnthropicDialect()),
    "POST /v1/messages/count_tokens": Endpoint(AnthropicDialect(), "count_tokens"),
    "POST /v1beta/models/{model}:generateContent": Endpoint(_gemini),
    "POST /v1beta/models/{model}:streamGenerateContent": Endpoint(_gemini_stream),
    "POST /v1beta/models/{model}:countTokens": Endpoint(_gemini, "count_tokens"),
    # google-genai >= 3 calls /v1 by default; Gemini CLI calls /v1beta.
    "POST /v1/models/{model}:generateContent": Endpoint(_gemini),
    "POST /v1/models/{model}:streamGenerateContent": Endpoint(_gemini_stream),
    "POST /v1/models/{model}:countTokens": Endpoint(_gemini, "count_tokens"),
}

# Every dialect's name, in registry order: what a harness spec may name (`harness/spec.py` builds its
# `Literal` from this, so a new dialect needs no second list).
DIALECT_NAMES: tuple[str, ...] = tuple(dict.fromkeys(e.dialect.name for e in ROUTES.values()))


def default_dialect() -> Dialect[Any]:
    """The dialect that renders errors for requests no route claims (OpenAI's format)."""
    return _openai_chat
