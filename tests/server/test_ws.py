"""`WS /ws`: one session per connection, typed error frames, isolation under concurrency, cleanup."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from echo_env import EchoAction, EchoEnvironment, EchoObservation
from openenv.core.auth import auth_headers

Serve = Callable[..., str]


def connect(url: str, **kwargs: Any) -> Any:
    """A raw WebSocket to a server a test started, with its token (servers require one by default)."""
    return ws_connect(url, additional_headers=auth_headers(url), **kwargs)


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


async def ask(ws: ClientConnection, frame: dict[str, Any] | str) -> dict[str, Any]:
    await ws.send(frame if isinstance(frame, str) else json.dumps(frame))
    return json.loads(await ws.recv())  # type: ignore[no-any-return]


async def test_reset_step_state_round_trip(echo_url: str) -> None:
    async with connect(ws_url(echo_url)) as ws:
        reply = await ask(ws, {"type": "reset", "data": {"episode_id": "ws-1"}})
        assert reply == {  # the reference's shape: fields nested, reward and done beside them
            "type": "observation",
            "data": {
                "observation": {"metadata": {}, "echoed_message": "", "message_length": 0},
                "reward": None,
                "done": False,
            },
        }
        reply = await ask(ws, {"type": "step", "data": {"message": "hello"}})
        assert reply["data"]["observation"]["echoed_message"] == "hello"
        assert reply["data"]["reward"] == pytest.approx(0.5)
        reply = await ask(ws, {"type": "state"})
        assert reply == {"type": "state", "data": {"episode_id": "ws-1", "step_count": 1, "max_steps": None}}
        assert await ask(ws, {"type": "close"}) == {"type": "closed", "data": {}}
        with pytest.raises(ConnectionClosed):
            await ws.recv()


@pytest.mark.parametrize(
    ("frame", "code", "needle"),
    [
        ("{not json", "malformed_json", "not valid JSON"),
        ('{"type": "dance"}', "unknown_message_type", "unknown message type 'dance'; expected one of reset"),
        ('{"data": {}}', "unknown_message_type", "no 'type' field"),
        (
            '{"type": "step", "data": {"mesage": "x"}}',
            "invalid_action",
            "action field 'mesage': Extra inputs",
        ),
        ('{"type": "reset", "data": {"seed": "abc"}}', "bad_request", "message field 'reset.data.seed'"),
        ("[1, 2]", "bad_request", "message field"),
    ],
)
async def test_bad_frames_get_their_own_error_code_and_the_socket_stays_usable(
    echo_url: str, frame: str, code: str, needle: str
) -> None:
    async with connect(ws_url(echo_url)) as ws:
        await ask(ws, {"type": "reset"})
        reply = await ask(ws, frame)
        assert reply["type"] == "error"
        assert reply["data"]["code"] == code
        assert needle in reply["data"]["message"]
        ok = await ask(ws, {"type": "step", "data": {"message": "still here"}})
        assert ok["data"]["observation"]["echoed_message"] == "still here"


async def test_step_before_reset_is_bad_request(echo_url: str) -> None:
    async with connect(ws_url(echo_url)) as ws:
        reply = await ask(ws, {"type": "step", "data": {"message": "early"}})
        assert reply["data"]["code"] == "bad_request"
        assert "reset before step" in reply["data"]["message"]


async def test_fifty_concurrent_sessions_keep_independent_state(serve: Serve) -> None:
    url = serve()

    async def episode(i: int) -> tuple[int, list[str], dict[str, Any]]:
        async with connect(ws_url(url)) as ws:
            await ask(ws, {"type": "reset", "data": {"episode_id": f"ep-{i}"}})
            echoed = []
            for k in range(i % 5 + 1):
                reply = await ask(ws, {"type": "step", "data": {"message": f"s{i}-{k}"}})
                echoed.append(reply["data"]["observation"]["echoed_message"])
            state = (await ask(ws, {"type": "state"}))["data"]
            return i, echoed, state

    results = await asyncio.gather(*(episode(i) for i in range(50)))
    for i, echoed, state in results:
        assert echoed == [f"s{i}-{k}" for k in range(i % 5 + 1)]
        assert state["episode_id"] == f"ep-{i}"
        assert state["step_count"] == i % 5 + 1


async def test_a_dropped_connection_frees_its_session_at_once(serve: Serve, http: httpx.Client) -> None:
    url = serve(max_sessions=2)
    first = await connect(ws_url(url))
    async with connect(ws_url(url)) as second:
        await ask(second, {"type": "reset"})
        async with connect(ws_url(url)) as third:
            reply = json.loads(await third.recv())
            assert reply["data"]["code"] == "capacity"
            with pytest.raises(ConnectionClosed) as info:
                await third.recv()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1013
        await first.close()  # no close message: just drop the socket
        for _ in range(50):
            if http.get(f"{url}/health").json()["active_sessions"] == 1:
                break
            await asyncio.sleep(0.02)
        async with connect(ws_url(url)) as fourth:
            assert (await ask(fourth, {"type": "reset"}))["type"] == "observation"


async def test_the_reaper_closes_idle_sockets_with_a_reason(serve: Serve, http: httpx.Client) -> None:
    url = serve(idle_timeout_s=0.2)
    async with connect(ws_url(url)) as ws:
        await ask(ws, {"type": "reset"})
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), timeout=5)
    assert info.value.rcvd is not None
    assert info.value.rcvd.code == 4408
    assert "idle" in info.value.rcvd.reason
    assert http.get(f"{url}/health").json()["active_sessions"] == 0


async def test_the_reaper_frees_idle_http_sessions(serve: Serve, http: httpx.Client) -> None:
    url = serve(idle_timeout_s=0.2)
    sid = http.post(f"{url}/reset", json={}).json()["session_id"]
    await asyncio.sleep(0.6)
    r = http.get(f"{url}/state", headers={"X-Session-Id": sid})
    assert r.json()["error"]["code"] == "unknown_session"


class _ParkedEcho(EchoEnvironment):
    """An echo env whose step waits (up to 30 s) until `close()` releases it, like a long harness turn."""

    blocking = True  # the echo env runs inline; this one must run in a worker thread

    def __init__(self) -> None:
        super().__init__()
        self.stepping = threading.Event()
        self.released = threading.Event()
        self.closed_at: float | None = None

    def step(self, action: EchoAction) -> EchoObservation:
        self.stepping.set()
        self.released.wait(30)
        return super().step(action)

    def close(self) -> None:
        self.closed_at = time.monotonic()
        self.released.set()


async def test_a_client_that_vanishes_mid_step_frees_its_session_while_the_step_runs(
    serve: Serve, http: httpx.Client
) -> None:
    envs: list[_ParkedEcho] = []

    def factory() -> _ParkedEcho:
        envs.append(_ParkedEcho())
        return envs[-1]

    url = serve(factory, action_type=EchoAction, observation_type=EchoObservation)
    ws = await connect(ws_url(url))
    await ask(ws, {"type": "reset"})
    await ws.send(json.dumps({"type": "step", "data": {"message": "slow"}}))
    assert await asyncio.to_thread(envs[0].stepping.wait, 5)
    sock = ws.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, no close frame
    dropped = time.monotonic()
    ws.transport.abort()
    for _ in range(200):
        if http.get(f"{url}/health").json()["active_sessions"] == 0:
            break
        await asyncio.sleep(0.02)
    assert http.get(f"{url}/health").json()["active_sessions"] == 0
    assert envs[0].closed_at is not None and envs[0].closed_at - dropped < 5.0, (
        "closed only after the step (30 s)"
    )


def test_a_frame_over_the_cap_closes_with_1009_whatever_server_runs_the_app() -> None:
    """uvicorn enforces `ws_max_size` itself (LocalServer, `openenv serve`); the app checks again for any
    other ASGI server (here Starlette's test client, which has no limit)."""
    from fastapi.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    from openenv.server import create_app
    from openenv.server.security import ServerSecurity

    app = create_app(
        EchoEnvironment, security=ServerSecurity(max_frame_bytes=1024, allowed_hosts=("testserver",))
    )
    headers = {"Authorization": f"Bearer {app.state.security.token}"}
    with TestClient(app) as client, client.websocket_connect("/ws", headers=headers) as sock:
        sock.send_text(json.dumps({"type": "step", "data": {"message": "x" * 2048}}))
        with pytest.raises(WebSocketDisconnect) as closed:
            sock.receive_text()
    assert closed.value.code == 1009
