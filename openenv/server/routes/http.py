"""Stateful HTTP: `POST /reset` opens (or resets) a session; step, state and close name it.

Reset and step answer in the reference OpenEnv's shape, `{"observation": {...}, "reward", "done"}`, with
ours only beside it: the session's id (`session_id` in the body and the `X-Session-Id` header), which
a reference client ignores. The id comes back in that header; POST bodies may carry it as `session_id`
instead, and `GET /state` / `DELETE /session` also take `?session_id=`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from openenv.core.http_errors import parse_body
from openenv.core.types import Observation
from openenv.core.wire import (
    SESSION_HEADER,
    ResetRequest,
    SessionReply,
    StepRequest,
    observation_json,
)
from openenv.errors import OpenEnvError
from openenv.server.routes.deps import registry
from openenv.server.sessions import EnvSessionRegistry

__all__ = ["BareRoute", "close", "reset", "router", "state", "step"]

router = APIRouter(tags=["session"])


def _json_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a route that reads its JSON body itself."""
    schema = {"content": {"application/json": {"schema": model.model_json_schema()}}, "required": True}
    return {"requestBody": schema}


class BareRoute(APIRoute):
    """A route documented like any other but called with the bare `Request`: no dependency solving.

    FastAPI solves an endpoint's parameters on every request even when it takes only the `Request`;
    on the step hot path that cost a fifth of the server's CPU per step.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        return self.endpoint


Registry = Annotated[EnvSessionRegistry, Depends(registry)]
SessionHeader = Annotated[str | None, Header(alias=SESSION_HEADER)]


@router.post("/reset", response_model=SessionReply)
async def reset(
    reg: Registry, header_id: SessionHeader = None, req: Annotated[ResetRequest | None, Body()] = None
) -> Response:
    """Reset the named session, or open a new one when no id is given."""
    req = req or ResetRequest()
    sid = header_id or req.session_id
    session = reg.get(sid) if sid else await reg.open("http")
    try:
        obs = await session.reset(req)
    except OpenEnvError:
        if not sid:  # a session that never reset successfully must not hold a slot
            await reg.close(session.id)
        raise
    return _session_reply(session.id, obs)


async def step(request: Request) -> Response:
    """Apply one action in the named session.

    The hot path: the body is parsed straight into `StepRequest` (one pydantic call) rather than through
    FastAPI's parameter machinery, which costs more than the echo env's whole step.
    """
    req = parse_body(StepRequest, await request.body())
    reg: EnvSessionRegistry = request.app.state.registry
    session = reg.get(request.headers.get(SESSION_HEADER) or req.session_id)
    obs = await session.step(req.action)
    return _session_reply(session.id, obs)


router.add_api_route(
    "/step",
    step,
    methods=["POST"],
    response_model=SessionReply,
    openapi_extra=_json_body(StepRequest),
    route_class_override=BareRoute,
)


@router.get("/state")
async def state(
    reg: Registry, header_id: SessionHeader = None, session_id: Annotated[str | None, Query()] = None
) -> Response:
    session = reg.get(header_id or session_id)
    current = await session.state()
    return Response(current.model_dump_json(), media_type="application/json")


@router.delete("/session", status_code=204)
async def close(
    reg: Registry, header_id: SessionHeader = None, session_id: Annotated[str | None, Query()] = None
) -> Response:
    """Close a session now instead of waiting for the idle reaper."""
    session = reg.get(header_id or session_id)
    await reg.close(session.id)
    return Response(status_code=204)


def _session_reply(session_id: str, obs: Observation) -> Response:
    # The reference's nested shape, dumped by the env's own observation class (subclass fields kept
    # without re-validation), with the session id as one more key.
    body = observation_json(obs)[:-1] + f',"session_id":"{session_id}"}}'
    return Response(body, media_type="application/json", headers={SESSION_HEADER: session_id})
