"""The capture proxy's ASGI app: wiring only (state, routers, the one error handler).

Two route families: the harness-facing model routes (`/s/<token>/v1/...`) and the admin API
(`/sessions...`: open, trajectory, sequences, close). The admin API can demand a bearer key
(`admin_key`) and can be served by an app of its own (`routes="admin"`) on a port harnesses never see.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import Depends, FastAPI, Request, Response

from openenv.capture.dialects import Dialect, default_dialect
from openenv.capture.registry import CaptureSessionRegistry
from openenv.capture.routes import admin, model
from openenv.capture.routes.model import MAX_BODY_BYTES, internal_error
from openenv.core.http_errors import install_error_handlers
from openenv.errors import OpenEnvError, Unauthorized

__all__ = ["FULL_COLLECTION_THRESHOLDS", "Routes", "create_app"]

# The collector's thresholds in a process that is just the proxy: a young collection every 7,000
# allocations, not CPython's 700, and a full collection at most every 100 middle ones, not 10. A full
# collection walks every object of every open session, ~0.1 s with 1,000 sessions open, and it ran every
# ~5 s there: 2% of the time the proxy was paused, which is the p99 of its requests. The young
# generations hold every in-flight request's coroutines, cells and closures (~15k objects with 1,000
# sessions open), which each middle collection walked again, every ~70 turns: with 10x fewer, the
# handler's p99 went from 5.6-6.2 to 4.3-4.6 ms (docs/benchmarks.md 11m). Almost nothing the proxy makes
# is cyclic garbage, so collecting it later holds little memory, and the idle release
# (`--release-idle`) still collects everything.
FULL_COLLECTION_THRESHOLDS = (7000, 10, 100)

Routes = Literal["all", "model", "admin"]


def create_app(
    registry: CaptureSessionRegistry,
    *,
    freeze_gc: bool = False,
    admin_key: str | None = None,
    routes: Routes = "all",
    model_base_url: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """The proxy app over `registry`'s sessions, renderer and backend.

    Args:
        registry: the sessions, renderer and backend to serve.
        freeze_gc: at startup, move every live object out of the collector's view. The ~400k objects of
            the imports, tokenizer and template are permanent, and walking them on every full collection
            cost as much as a request. It is process-wide, so only a process that is just the proxy
            (`openenv proxy`) should ask for it; an embedding trainer keeps its collector as it was.
        admin_key: when set, the admin routes answer 401 unless `Authorization: Bearer <admin_key>`.
            A harness holds only its session token, so it can then read no trajectory, not even its own.
        routes: `all` (one port), or `model` / `admin` for two apps on two ports sharing `registry`.
        model_base_url: where harnesses reach the model routes; sessions opened through an admin-only
            app get base URLs there (set `app.state.model_base_url` later if the port is picked at bind).
        max_body_bytes: larger request bodies get a 413 in the caller's dialect, unread.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.sessions = registry
        if freeze_gc:
            gc.freeze()
            gc.set_threshold(*FULL_COLLECTION_THRESHOLDS)
        owner = routes != "admin"  # the model app owns the backend, the reaper and the journals
        reaper = asyncio.get_running_loop().create_task(registry.reap_forever()) if owner else None
        yield
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        if owner:
            registry.close_all("shutdown")  # parked turns answered, journals closed with a last line
            await registry.backend.aclose()

    app = FastAPI(title="openenv capture proxy", lifespan=lifespan)
    app.state.admin_key = admin_key
    app.state.model_base_url = model_base_url
    app.state.max_body_bytes = max_body_bytes
    if routes != "model":
        app.include_router(admin.router, dependencies=[Depends(_require_admin_key)])
    if routes != "admin":
        app.include_router(model.router)
    install_error_handlers(app, _render, unknown_route_hint="; model routes live under /s/<token>/v1/...")
    app.add_exception_handler(Exception, _crash)
    return app


async def _require_admin_key(request: Request) -> None:
    """Admin routes only: `Authorization: Bearer <key>` when the app has a key (constant-time compare)."""
    key: str | None = request.app.state.admin_key
    if key is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), key.encode()):
        raise Unauthorized(
            "the admin API needs 'Authorization: Bearer <admin key>' (the key the proxy was "
            "started with: --admin-key or OPENENV_CAPTURE_ADMIN_KEY)"
        )


def _dialect(request: Request) -> Dialect[Any]:
    return getattr(request.state, "dialect", None) or default_dialect()


async def _render(request: Request, exc: OpenEnvError) -> Response:
    """The one place errors become responses, in the caller's dialect."""
    status, body = _dialect(request).error_body(exc)
    return Response(body.model_dump_json(), status_code=status, media_type="application/json")


async def _crash(request: Request, exc: Exception) -> Response:
    """Last resort (routes convert their own): a generic message and an error id, never the exception text."""
    return await _render(request, internal_error(exc))
