"""`create_app`: wires an env factory into a FastAPI app (lifespan, routers, one error handler).

Route bodies live in `openenv.server.routes`; session bookkeeping lives in `openenv.server.sessions`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from openenv.core.environment import EnvMetadata
from openenv.core.http_errors import install_error_handlers
from openenv.core.types import Action, Observation, State
from openenv.core.wire import ErrorBody, HTTPError
from openenv.errors import OpenEnvError
from openenv.server.mcp import mount_mcp
from openenv.server.openapi import document_env
from openenv.server.routes import http, info, ws
from openenv.server.security import SecurityMiddleware, ServerSecurity
from openenv.server.sessions import EnvFactory, EnvSessionRegistry, EnvTypes

__all__ = ["DEFAULT_HTTP_EVICT_AFTER_S", "DEFAULT_IDLE_TIMEOUT_S", "DEFAULT_MAX_SESSIONS", "create_app"]

log = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 600.0
DEFAULT_HTTP_EVICT_AFTER_S = 30.0


def create_app(
    env_factory: EnvFactory,
    *,
    action_type: type[Action] | None = None,
    observation_type: type[Observation] | None = None,
    state_type: type[State] | None = None,
    metadata: EnvMetadata | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
    max_workers: int | None = None,
    security: ServerSecurity | None = None,
    http_evict_after_s: float | None = DEFAULT_HTTP_EVICT_AFTER_S,
) -> FastAPI:
    """Build the ASGI app that serves an environment, one instance per session.

    Args:
        env_factory: An `Environment` subclass, or any callable returning a fresh env instance.
        action_type: The action model; taken from the env class when the factory is one.
        observation_type: The observation model; likewise.
        state_type: The state model; likewise (defaults to `State`).
        metadata: What `/metadata` reports; defaults to the env class's `metadata()` (a manifest's
            name, version and description when served from an env folder).
        max_sessions: Live sessions allowed at once; the next reset or WebSocket gets a `capacity` error.
        idle_timeout_s: Close sessions untouched this long; None turns the reaper off.
        max_workers: Threads that run sync envs (default: one per session, at most 32).
        http_evict_after_s: At capacity, an HTTP session idle this long is closed to make room for a new
            client (HTTP sessions have no connection that ends with their client); None: never.
        security: Token, Host/Origin rules, size caps and inline-task policy. Default: a fresh random
            token (read it from `app.state.security.token`; `LocalServer` hands it to in-process
            clients), loopback names only, no foreign origins, 16 MiB caps, tasks by id only.

    Returns:
        A FastAPI app; run it with uvicorn or `openenv.server.LocalServer`.
    """
    security = security or ServerSecurity()
    types = EnvTypes.infer(
        env_factory,
        action_type=action_type,
        observation_type=observation_type,
        state_type=state_type,
        metadata=metadata,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        executor = ThreadPoolExecutor(max_workers or min(max_sessions, 32), thread_name_prefix="openenv-env")
        registry = EnvSessionRegistry(
            env_factory,
            types,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout_s,
            executor=executor,
            allow_inline_tasks=security.allow_inline_tasks,
            http_evict_after_s=http_evict_after_s,
        )
        app.state.registry = registry
        reaper = asyncio.create_task(registry.run_reaper(), name="openenv-session-reaper")
        try:
            yield
        finally:
            reaper.cancel()
            await registry.close_all()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title=f"openenv: {types.metadata.name}", version=types.metadata.version, lifespan=lifespan)
    app.state.types = types
    app.state.security = security
    app.include_router(info.router)
    app.include_router(http.router)
    app.include_router(ws.router)
    # MCP tools at /mcp (ecosystem issue 8); the reference's JSON-RPC flow also rides the WebSocket.
    app.state.mcp_rpc = mount_mcp(app, env_factory, types.metadata, security)
    document_env(app, types)  # the env's own models and the real error answers in /openapi.json
    install_error_handlers(app, _render_error)
    app.add_middleware(SecurityMiddleware, security=security)  # token, Host/Origin, JSON only, size cap
    return app


async def _render_error(request: Request, err: OpenEnvError) -> JSONResponse:
    """The one place an `OpenEnvError` becomes an HTTP answer: `{"error": {code, message, details}}`."""
    body = HTTPError(error=ErrorBody.of(err))
    return JSONResponse(body.model_dump(), status_code=err.status_code)
