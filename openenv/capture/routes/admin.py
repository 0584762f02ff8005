"""The admin API: open and list sessions, read their trajectory and training sequences, close them.

`GET /sessions` lists the live sessions (tokens included) for the proxy's operator, and so only when the
admin API has a key (`openenv proxy` makes one by default); without a key a caller reads only what it
holds the token of.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from openenv.capture.canonical import SamplingParams
from openenv.capture.registry import CaptureSessionRegistry
from openenv.capture.sampling_policy import SamplingPolicy
from openenv.capture.session import Mode
from openenv.capture.trajectory import SequenceRow, SequenceStats, TurnRecord
from openenv.errors import NotFound, OpenEnvError

__all__ = [
    "OpenSession",
    "SequencesOut",
    "SessionInfo",
    "SessionList",
    "SessionSummary",
    "TrajectoryOut",
    "close_session",
    "list_sessions",
    "open_session",
    "router",
    "sequences",
    "trajectory",
]


class _GuardedRoute(APIRoute):
    """An unexpected exception becomes the generic error with an id here, inside the app's error
    handling, so the client gets a JSON error and keeps its connection (Starlette's last-resort handler
    answers and then re-raises, and uvicorn then closes the connection)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            from openenv.capture.routes.model import internal_error

            try:
                return await handler(request)
            except OpenEnvError:
                raise
            except Exception as exc:
                if type(exc).__module__.startswith(("fastapi", "starlette")):
                    raise  # validation and HTTP errors have their own handlers
                raise internal_error(exc) from None

        return guarded


router = APIRouter(prefix="/sessions", tags=["sessions"], route_class=_GuardedRoute)


class OpenSession(BaseModel):
    """`POST /sessions` body. Gated sessions need an in-process controller (`CaptureServer`)."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode = "auto"
    sampling: SamplingParams | None = None
    policy: SamplingPolicy = "trainer"


class SessionInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    base_url: str
    journal: str | None = None


class SessionSummary(BaseModel):
    """One live session in `GET /sessions`."""

    model_config = ConfigDict(extra="forbid")

    token: str
    base_url: str
    mode: Mode
    turns: int
    idle_s: float
    journal: str | None


class SessionList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessions: list[SessionSummary]
    max_sessions: int
    idle_timeout_s: float | None
    reaped: int


class TrajectoryOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    turns: list[TurnRecord]


class SequencesOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    sequences: list[SequenceRow]
    stats: SequenceStats


def _registry(request: Request) -> CaptureSessionRegistry:
    return request.app.state.sessions


@router.post("", status_code=201)
async def open_session(request: Request, body: OpenSession | None = None) -> SessionInfo:
    body = body or OpenSession()
    # On a separate admin port the harness-facing URL is the model port's, not this request's.
    base_url = request.app.state.model_base_url or str(request.base_url)
    registry = _registry(request)
    session = registry.open(
        base_url=base_url, mode=body.mode, sampling=body.sampling, sampling_policy=body.policy
    )
    try:
        await session.check_trainable()  # a training session on a raw-logprob engine is refused here
    except BaseException:
        registry.close(session.token, reason="refused")
        raise
    journal = str(session.journal.path) if session.journal is not None else None
    return SessionInfo(token=session.token, base_url=session.base_url, journal=journal)


@router.get("")
async def list_sessions(request: Request) -> SessionList:
    """The live sessions, least recently used first, and the capacity they count against. Only behind an
    admin key: without one, any local process could read every session's token here."""
    if request.app.state.admin_key is None:
        raise NotFound(
            "listing sessions needs an admin key (start the proxy with one); read a session by its "
            "token at /sessions/{token}/trajectory"
        )
    registry = _registry(request)
    rows = [
        SessionSummary(
            token=s.token,
            base_url=s.base_url,
            mode=s.mode,
            turns=len(s.trajectory.turns),
            idle_s=round(registry.idle_seconds(s), 3),
            journal=str(s.journal.path) if s.journal is not None else None,
        )
        for s in registry.sessions.values()
    ]
    rows.sort(key=lambda r: -r.idle_s)
    return SessionList(
        sessions=rows,
        max_sessions=registry.max_sessions,
        idle_timeout_s=registry.idle_timeout_s,
        reaped=registry.reaped,
    )


@router.get("/{token}/trajectory")
async def trajectory(request: Request, token: str) -> TrajectoryOut:
    session = _registry(request).get(token)
    return TrajectoryOut(token=token, turns=session.trajectory.records())


@router.get("/{token}/sequences")
async def sequences(request: Request, token: str) -> SequencesOut:
    session = _registry(request).get(token)
    return SequencesOut(token=token, sequences=session.trajectory.rows(), stats=session.trajectory.stats())


@router.delete("/{token}", status_code=204)
async def close_session(request: Request, token: str) -> None:
    _registry(request).close(token)
