"""The admin API: open sessions, read their trajectory and training sequences, close them.

There is no route that lists sessions: a caller reads only what it holds the token of (and, with an
admin key, only with that key too).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from openenv.capture.canonical import SamplingParams
from openenv.capture.session import Mode
from openenv.capture.sessions import SessionManager
from openenv.capture.trajectory import SequenceRow, SequenceStats, TurnRecord

__all__ = [
    "OpenSession",
    "SequencesOut",
    "SessionInfo",
    "TrajectoryOut",
    "close_session",
    "open_session",
    "router",
    "sequences",
    "trajectory",
]

router = APIRouter(prefix="/sessions", tags=["sessions"])


class OpenSession(BaseModel):
    """`POST /sessions` body. Gated sessions need an in-process controller (`CaptureServer`)."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode = "auto"
    sampling: SamplingParams | None = None


class SessionInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    base_url: str


class TrajectoryOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    turns: list[TurnRecord]


class SequencesOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str
    sequences: list[SequenceRow]
    stats: SequenceStats


def _manager(request: Request) -> SessionManager:
    return request.app.state.sessions  # type: ignore[no-any-return]


@router.post("", status_code=201)
async def open_session(request: Request, body: OpenSession | None = None) -> SessionInfo:
    body = body or OpenSession()
    # On a separate admin port the harness-facing URL is the model port's, not this request's.
    base_url = request.app.state.model_base_url or str(request.base_url)
    session = _manager(request).open(base_url=base_url, mode=body.mode, sampling=body.sampling)
    return SessionInfo(token=session.token, base_url=session.base_url)


@router.get("/{token}/trajectory")
async def trajectory(request: Request, token: str) -> TrajectoryOut:
    session = _manager(request).get(token)
    return TrajectoryOut(token=token, turns=session.trajectory.records())


@router.get("/{token}/sequences")
async def sequences(request: Request, token: str) -> SequencesOut:
    session = _manager(request).get(token)
    return SequencesOut(token=token, sequences=session.trajectory.rows(), stats=session.trajectory.stats())


@router.delete("/{token}", status_code=204)
async def close_session(request: Request, token: str) -> None:
    _manager(request).close(token)
