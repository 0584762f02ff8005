"""The capture proxy's ASGI app: wiring only (state, routers, the one error handler)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from openenv.capture.dialects import Dialect, default_dialect
from openenv.capture.routes import model, sessions
from openenv.capture.sessions import SessionManager
from openenv.errors import BadRequest, EnvError, NotFound, OpenEnvError

__all__ = ["create_app"]


def create_app(manager: SessionManager, *, freeze_gc: bool = False) -> FastAPI:
    """The proxy app over `manager`'s sessions, renderer and backend.

    Args:
        manager: the sessions, renderer and backend to serve.
        freeze_gc: at startup, move every live object out of the collector's view. The ~400k objects of
            the imports, tokenizer and template are permanent, and walking them on every full collection
            cost as much as a request. It is process-wide, so only a process that is just the proxy
            (`openenv proxy`) should ask for it; an embedding trainer keeps its collector as it was.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.sessions = manager
        if freeze_gc:
            gc.freeze()
        yield
        await manager.backend.aclose()

    app = FastAPI(title="openenv capture proxy", lifespan=lifespan)
    app.include_router(sessions.router)
    app.include_router(model.router)
    app.add_exception_handler(OpenEnvError, _render)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _crash)
    return app


def _dialect(request: Request) -> Dialect:
    return getattr(request.state, "dialect", None) or default_dialect()


async def _render(request: Request, exc: OpenEnvError) -> Response:
    """The one place errors become responses, in the caller's dialect."""
    status, body = _dialect(request).error_body(exc)
    return Response(body.model_dump_json(), status_code=status, media_type="application/json")


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        err: OpenEnvError = NotFound(f"no route {request.method} {request.url.path}; model routes live "
                                     "under /s/<token>/v1/...")
    else:
        err = BadRequest(str(exc.detail))
        err.status_code = exc.status_code
    return await _render(request, err)


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    lines = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
    return await _render(request, BadRequest("invalid request: " + "; ".join(lines)))


async def _crash(request: Request, exc: Exception) -> Response:
    return await _render(request, EnvError(f"internal error: {type(exc).__name__}: {exc}"))


