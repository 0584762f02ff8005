"""Shared route dependencies: the app's session registry and env models, set up by `create_app`."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from openenv.server.sessions import EnvSessionRegistry, EnvTypes

__all__ = ["env_types", "registry"]


async def registry(conn: HTTPConnection) -> EnvSessionRegistry:
    """The live registry (created in the app's lifespan). Async so FastAPI does not run it in a thread."""
    return conn.app.state.registry


async def env_types(conn: HTTPConnection) -> EnvTypes:
    return conn.app.state.types
