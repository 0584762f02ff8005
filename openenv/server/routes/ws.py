"""`WS /ws`: one session per connection, frames dispatched through the `ClientMessage` union.

A bad frame gets a typed error reply and the connection stays usable; a dropped connection frees its
session at once, even while a long `step` is running (a reader task watches the socket during every
call, and the call is abandoned when the client is gone); a full server answers a `capacity` error
frame and closes with 1013 (try again later).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import assert_never

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from openenv.core.validation import json_error, validation_message
from openenv.core.wire import (
    CloseMessage,
    ErrorBody,
    ErrorReply,
    McpMessage,
    ResetMessage,
    StateMessage,
    StepMessage,
    client_message_adapter,
    encode_frame,
)
from openenv.errors import BadRequest, CapacityError, MalformedMessage, OpenEnvError, UnknownMessageType
from openenv.server.mcp_rpc import McpRpc
from openenv.server.routes.deps import registry
from openenv.server.sessions import EnvSession, EnvSessionRegistry

__all__ = ["FRAME_TOO_BIG_CODE", "IDLE_CLOSE_CODE", "handle_frame", "router", "session_socket"]

log = logging.getLogger(__name__)
router = APIRouter()

IDLE_CLOSE_CODE = 4408  # application range (4000-4999): the reaper closed an idle session
FRAME_TOO_BIG_CODE = 1009  # RFC 6455 "message too big"
_MESSAGE_TYPES = "reset, step, state, close, mcp"


@router.websocket("/ws")
async def session_socket(websocket: WebSocket) -> None:
    reg = await registry(websocket)
    await websocket.accept()

    async def on_reap() -> None:
        reason = f"session closed after {reg.idle_timeout_s:g} s idle"
        await websocket.close(code=IDLE_CLOSE_CODE, reason=reason)

    attach_to = websocket.query_params.get("session_id")
    try:
        session = _attach(reg, attach_to) if attach_to else await reg.open("ws", on_reap=on_reap)
    except OpenEnvError as err:
        await websocket.send_text(_error_frame(err))
        await websocket.close(code=1013 if isinstance(err, CapacityError) else 1008, reason=err.code)
        return
    try:
        await _serve(websocket, session)
    except (WebSocketDisconnect, OSError, RuntimeError):
        pass  # the client went away (or the reaper closed the socket); the session goes below
    finally:
        if not attach_to or session.close_on_detach:
            await reg.close(session.id)
        session.attached = False


def _attach(reg: EnvSessionRegistry, session_id: str) -> EnvSession:
    """The live session a reference `MCPToolClient` opened with `openenv/session/create`: its WebSocket
    drives the same env instance. It stays open when the socket ends (closed by `openenv/session/close`).

    Raises:
        UnknownSession: no such session.
        BadRequest: a WebSocket is attached to it already.
    """
    session = reg.get(session_id)
    if session.attached:
        raise BadRequest(f"session {session_id!r} already has an attached WebSocket")
    session.attached = True
    return session


async def _serve(websocket: WebSocket, session: EnvSession) -> None:
    limit = websocket.app.state.security.max_frame_bytes
    rpc: McpRpc | None = getattr(websocket.app.state, "mcp_rpc", None)
    if session.inline:
        # An inline env's calls never suspend, so there is no call to abandon when the client leaves and
        # no need for a reader beside it: frames are read here, saving a task hop and a queue per frame.
        while (raw := await _next_frame(websocket, limit)) is not None:
            reply, done = await _reply(session, raw, rpc)
            await websocket.send_text(reply)
            if done:
                await websocket.close(code=1000)
                return
        return
    frames: asyncio.Queue[str | bytes | None] = asyncio.Queue()
    reader = asyncio.create_task(_read(websocket, frames, limit), name=f"openenv-ws-reader-{session.id[:8]}")
    try:
        while (raw := await frames.get()) is not None:
            reply, done = await _answer_while_connected(session, raw, reader, rpc)
            await websocket.send_text(reply)
            if done:
                await websocket.close(code=1000)
                return
    finally:
        reader.cancel()


async def _read(websocket: WebSocket, frames: asyncio.Queue[str | bytes | None], limit: int) -> None:
    """Queue every frame; a `None` marks the end of the connection."""
    try:
        while (frame := await _next_frame(websocket, limit)) is not None:
            frames.put_nowait(frame)
    finally:
        frames.put_nowait(None)


async def _next_frame(websocket: WebSocket, limit: int) -> str | bytes | None:
    """The next frame, or `None` at the end of the connection (disconnect, transport error, or a frame
    over the cap: closed with 1009, as RFC 6455 says, before it is parsed)."""
    try:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        frame: str | bytes = message.get("text") or message.get("bytes") or b""
        if len(frame) > limit:  # characters for text: at most 4 bytes each, so the cap holds in bytes/4
            log.warning("closing a WebSocket that sent a %d-character frame (cap %d)", len(frame), limit)
            await websocket.close(code=FRAME_TOO_BIG_CODE, reason=f"frame over {limit} bytes")
            return None
        return frame
    except (WebSocketDisconnect, OSError, RuntimeError):
        return None


async def _answer_while_connected(
    session: EnvSession, raw: str | bytes, reader: asyncio.Task[None], rpc: McpRpc | None
) -> tuple[str, bool]:
    """Handle one frame, unless the client vanishes first: then the call is abandoned (cancelled) so the
    session can be closed now, not when a step that may run for minutes returns to nobody.

    Inline envs (`EnvSession.inline`) never come here: `_serve` answers their frames directly."""
    work = asyncio.ensure_future(_reply(session, raw, rpc))

    def abandon(_: asyncio.Task[None]) -> None:
        work.cancel()

    # A done-callback, not asyncio.wait: the same watch for a third of the per-frame cost (~7 vs 20 us).
    reader.add_done_callback(abandon)
    try:
        return await work
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if not reader.done() or (me is not None and me.cancelling()):
            raise  # this task itself was cancelled (server shutdown); `work` went with it
        log.info("client of session %s disconnected mid-call; abandoning the call", session.id)
        raise WebSocketDisconnect(code=1006) from None
    finally:
        reader.remove_done_callback(abandon)


async def _reply(session: EnvSession, raw: str | bytes, rpc: McpRpc | None) -> tuple[str, bool]:
    try:
        return await handle_frame(session, raw, rpc)
    except OpenEnvError as err:
        return _error_frame(err), False


async def handle_frame(session: EnvSession, raw: str | bytes, rpc: McpRpc | None = None) -> tuple[str, bool]:
    """Apply one client frame to the session; returns the reply frame and whether to hang up."""
    try:
        msg = client_message_adapter.validate_json(raw)
    except ValidationError as exc:
        raise _frame_error(exc) from None
    match msg:
        case ResetMessage():
            return encode_frame("observation", await session.reset(msg.data)), False
        case StepMessage():
            return encode_frame("observation", await session.step(msg.data)), False
        case StateMessage():
            return encode_frame("state", await session.state()), False
        case CloseMessage():
            return encode_frame("closed"), True
        case McpMessage():
            if rpc is None:
                raise UnknownMessageType("this server has no MCP handler", type="mcp")
            reply = await rpc.handle(msg.data, session=session)
            return json.dumps({"type": "mcp", "data": reply}), False
        case _:
            assert_never(msg)


def _frame_error(exc: ValidationError) -> OpenEnvError:
    """Name what was wrong with a frame: not JSON, no/unknown `type`, or a bad field."""
    if (reason := json_error(exc)) is not None:
        return MalformedMessage(f"the frame is not valid JSON: {reason}")
    first = exc.errors()[0]
    if first["type"] == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag")
        return UnknownMessageType(f"unknown message type {tag!r}; expected one of {_MESSAGE_TYPES}", type=tag)
    if first["type"] == "union_tag_not_found":
        return UnknownMessageType(f"the frame has no 'type' field; expected one of {_MESSAGE_TYPES}")
    return BadRequest(validation_message(exc, "message"))


def _error_frame(err: OpenEnvError) -> str:
    return ErrorReply(data=ErrorBody.of(err)).model_dump_json()
