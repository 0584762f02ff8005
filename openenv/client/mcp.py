"""`connect_mcp`: the official `mcp` SDK client for an env server's `/mcp`, sending the server's token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from openenv.core.auth import auth_headers

__all__ = ["connect_mcp"]


@contextlib.asynccontextmanager
async def connect_mcp(base_url: str, *, token: str | None = None) -> AsyncIterator[Any]:
    """An initialized `mcp.client.Client` for `base_url/mcp`.

    Args:
        base_url: the env server's `http(s)://host:port`.
        token: its bearer token; default: found like `EnvClient`'s (`openenv.core.auth.token_for`).
    """
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    base = base_url.rstrip("/")
    async with create_mcp_http_client(headers=auth_headers(base, token)) as http:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            yield client
