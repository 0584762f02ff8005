"""The env server against the attacks of issue 17, each written as the attack itself on a real socket.

Threat model (docs/security.md): network clients and web pages are not trusted. A page in the user's
browser reaches a server on localhost by a cross-site request (any `Origin`, `text/plain` bodies, a
WebSocket) or by DNS rebinding (`Host: evil.example` resolved to 127.0.0.1). Each test records
`attack=<name>, blocked=<bool>`; the suite prints "attacks tried / blocked" (tests/reliability/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from echo_env import EchoAction, EchoEnvironment, EchoObservation
from openenv.server import LocalServer, create_app
from openenv.server.security import ServerSecurity

EVIL = "http://evil.example"


@pytest.fixture
def serve() -> Iterator[Callable[..., LocalServer]]:
    started: list[LocalServer] = []

    def make(factory: Any = EchoEnvironment, **kwargs: Any) -> LocalServer:
        started.append(LocalServer(create_app(factory, **kwargs)).start())
        return started[-1]

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def echo(serve: Callable[..., LocalServer]) -> LocalServer:
    return serve()


def ws(server: LocalServer) -> str:
    return server.base_url.replace("http://", "ws://") + "/ws"


async def ws_refused(url: str, headers: dict[str, str], **connect_args: Any) -> int | None:
    """The HTTP status a WebSocket handshake was refused with; None if it was accepted."""
    try:
        async with connect(url, additional_headers=headers, open_timeout=5, **connect_args):
            return None
    except InvalidStatus as exc:
        return exc.response.status_code


# ---- the token ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Basic Zm9vOmJhcg=="])
def test_a_request_without_the_token_is_refused(echo: LocalServer, auth: str | None, figures: Any) -> None:
    headers = {"Authorization": auth} if auth else {}
    r = httpx.post(f"{echo.base_url}/reset", json={}, headers=headers)
    health = httpx.get(f"{echo.base_url}/health").json()
    figures.record(attack=f"reset with authorization={auth}", blocked=r.status_code == 401)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"
    assert health["active_sessions"] == 0  # no session was opened, no env was built


async def test_a_websocket_without_the_token_is_refused_with_the_reason(
    echo: LocalServer, figures: Any
) -> None:
    status = await ws_refused(ws(echo), {})
    figures.record(attack="websocket without token", blocked=status == 401)
    assert status == 401
    with_token = await ws_refused(ws(echo), echo.headers)
    assert with_token is None


async def test_the_env_client_names_a_missing_token(echo: LocalServer) -> None:
    from openenv.client import EnvClient
    from openenv.errors import Unauthorized

    with pytest.raises(Unauthorized, match="Bearer"):
        async with EnvClient(echo.base_url, token="not-the-token") as client:
            await client.reset()


def test_a_token_less_server_serves_loopback_peers_only() -> None:
    from fastapi.testclient import TestClient

    app = create_app(EchoEnvironment, security=ServerSecurity(token=None))
    with TestClient(app, base_url="http://127.0.0.1") as client:  # the test client's peer is "testclient"
        r = client.post("/reset", json={})
    assert r.status_code == 401 and "loopback" in r.json()["error"]["message"]
    with LocalServer(app) as server:  # a real loopback peer
        assert httpx.post(f"{server.base_url}/reset", json={}).status_code == 200


def test_no_token_is_refused_on_an_address_other_than_loopback() -> None:
    from openenv.errors import BadRequest

    with pytest.raises(BadRequest, match="loopback"):
        ServerSecurity.for_bind("0.0.0.0", no_token=True)
    assert ServerSecurity.for_bind("127.0.0.1", no_token=True).token is None
    assert ServerSecurity.for_bind("0.0.0.0").token  # a fresh token, never none by default


# ---- web pages: Origin, DNS rebinding, cross-site bodies ---------------------------------------------------


async def test_a_websocket_from_a_foreign_web_page_is_refused(echo: LocalServer, figures: Any) -> None:
    with_token = await ws_refused(ws(echo), {**echo.headers, "Origin": EVIL})
    without = await ws_refused(ws(echo), {"Origin": EVIL})
    own = await ws_refused(ws(echo), {**echo.headers, "Origin": echo.base_url})
    figures.record(attack="websocket with Origin: evil.example", blocked=with_token == 403 and without == 403)
    assert (with_token, without, own) == (403, 403, None)


@pytest.mark.parametrize("path", ["/reset", "/mcp"])
def test_a_post_from_a_foreign_web_page_is_refused(echo: LocalServer, path: str, figures: Any) -> None:
    r = httpx.post(f"{echo.base_url}{path}", json={}, headers={**echo.headers, "Origin": EVIL})
    figures.record(attack=f"POST {path} with Origin: evil.example", blocked=r.status_code == 403)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize("path", ["/reset", "/mcp", "/ws"])
async def test_dns_rebinding_is_refused_by_the_host_check(echo: LocalServer, path: str, figures: Any) -> None:
    """A page on evil.example, re-pointed at 127.0.0.1, is same-origin to the browser; its Host is not ours."""
    host = {"Host": f"evil.example:{echo.port}"}
    if path == "/ws":  # the client dials 127.0.0.1 but names evil.example, as the rebound browser does
        status = await ws_refused(
            f"ws://evil.example:{echo.port}/ws", echo.headers, host="127.0.0.1", port=echo.port
        )
    else:
        status = httpx.post(f"{echo.base_url}{path}", json={}, headers={**echo.headers, **host}).status_code
    figures.record(attack=f"{path} with Host: evil.example", blocked=status == 403)
    assert status == 403


def test_mcp_turns_the_sdks_own_dns_rebinding_protection_on() -> None:
    settings = ServerSecurity().mcp_transport_security()
    assert settings.enable_dns_rebinding_protection
    assert "127.0.0.1:*" in settings.allowed_hosts and "evil.example:*" not in settings.allowed_hosts


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", None]
)
def test_a_body_that_is_not_json_is_refused_before_it_is_parsed(
    echo: LocalServer, ctype: str | None, figures: Any
) -> None:
    """The 'simple' cross-site POST a page can send without a CORS preflight (on /step, the body used to
    be parsed as JSON whatever its type)."""
    sid = httpx.post(f"{echo.base_url}/reset", json={}, headers=echo.headers).json()["session_id"]
    headers = {**echo.headers, "X-Session-Id": sid, **({"Content-Type": ctype} if ctype else {})}
    step = httpx.post(f"{echo.base_url}/step", content=b'{"action": {"message": "hi"}}', headers=headers)
    reset = httpx.post(f"{echo.base_url}/reset", content=b'{"options": {}}', headers=headers)
    figures.record(
        attack=f"POST /step and /reset as {ctype}", blocked=step.status_code == reset.status_code == 415
    )
    assert step.status_code == 415 and step.json()["error"]["code"] == "unsupported_media_type"
    assert reset.status_code == 415


# ---- size caps ---------------------------------------------------------------------------------------------


def test_a_60_mib_step_is_refused_with_413_and_the_server_keeps_serving(
    serve: Callable[..., LocalServer], figures: Any
) -> None:
    server = serve()
    sid = httpx.post(f"{server.base_url}/reset", json={}, headers=server.headers).json()["session_id"]
    body = json.dumps({"action": {"message": "x" * (60 * 2**20)}})
    r = httpx.post(
        f"{server.base_url}/step",
        content=body,
        timeout=60,
        headers={**server.headers, "Content-Type": "application/json", "X-Session-Id": sid},
    )
    chunked = httpx.post(
        f"{server.base_url}/step",
        content=iter([body.encode()[i : i + 2**20] for i in range(0, 20 * 2**20, 2**20)]),
        timeout=60,
        headers={**server.headers, "Content-Type": "application/json", "X-Session-Id": sid},
    )
    figures.record(
        attack="60 MiB /step, and 20 MiB chunked", blocked=r.status_code == 413 and chunked.status_code == 413
    )
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    assert chunked.status_code == 413
    ok = httpx.post(
        f"{server.base_url}/step",
        json={"action": {"message": "hi"}},
        headers={**server.headers, "X-Session-Id": sid},
    )
    assert ok.status_code == 200


async def test_a_websocket_frame_over_the_cap_closes_the_socket_with_1009(
    serve: Callable[..., LocalServer], figures: Any
) -> None:
    server = serve(security=ServerSecurity(max_frame_bytes=2**20))
    async with connect(ws(server), additional_headers=server.headers, max_size=None) as sock:
        await sock.send(json.dumps({"type": "step", "data": {"message": "x" * (4 * 2**20)}}))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(sock.recv(), 10)
    code = closed.value.rcvd.code if closed.value.rcvd else None
    figures.record(attack="4 MiB WebSocket frame (cap 1 MiB)", blocked=code == 1009)
    assert code == 1009


# ---- sessions ----------------------------------------------------------------------------------------------


async def test_post_reset_flooding_no_longer_locks_everyone_out(figures: Any) -> None:
    """64 POST /reset that never come back used to hold every slot until the 600 s reaper."""
    app = create_app(EchoEnvironment, max_sessions=64, http_evict_after_s=None)  # first: as before
    with LocalServer(app) as server:
        async with httpx.AsyncClient(headers=server.headers, timeout=60) as http:
            flood = await asyncio.gather(*(http.post(f"{server.base_url}/reset", json={}) for _ in range(64)))
            assert all(r.status_code == 200 for r in flood)
            full = await http.post(f"{server.base_url}/reset", json={})
            app.state.registry.http_evict_after_s = 0.2  # now as shipped (30 s by default), shortened
            await asyncio.sleep(0.3)
            later = await http.post(f"{server.base_url}/reset", json={})
            health = (await http.get(f"{server.base_url}/health")).json()
    figures.record(attack="64 POST /reset then a new client", blocked=later.status_code == 200)
    assert full.status_code == 503  # without eviction the flood holds every slot
    assert later.status_code == 200  # with it, the longest-idle abandoned session gives way...
    assert health["active_sessions"] == 64  # ...and the cap still holds


_STARTED = threading.Event()
_RELEASE = threading.Event()


class _SlowTool(EchoEnvironment):
    @classmethod
    def mcp_tools(cls) -> list[Any]:
        async def wait(hold: bool) -> str:
            """Hold the call open until the test releases it, like an episode."""
            _STARTED.set()
            while hold and not _RELEASE.is_set():
                await asyncio.sleep(0.01)
            return "done"

        return [wait]


async def test_mcp_calls_count_against_max_sessions(serve: Callable[..., LocalServer], figures: Any) -> None:
    from openenv.client.mcp import connect_mcp

    _STARTED.clear()
    _RELEASE.clear()
    server = serve(_SlowTool, max_sessions=1)
    async with connect_mcp(server.base_url) as mcp:
        call = asyncio.create_task(mcp.call_tool("wait", {"hold": True}))
        assert await asyncio.to_thread(_STARTED.wait, 30)
        async with httpx.AsyncClient(headers=server.headers) as http:
            health = (await http.get(f"{server.base_url}/health")).json()
            refused_reset = await http.post(f"{server.base_url}/reset", json={})
        _RELEASE.set()
        assert (await call).is_error is False
        async with connect(ws(server), additional_headers=server.headers) as sock:
            await sock.send('{"type": "reset", "data": {}}')
            assert json.loads(await sock.recv())["type"] == "observation"  # the session holds the slot now
            second = await mcp.call_tool("wait", {"hold": False})
            await sock.close()
    figures.record(
        attack="MCP episodes beyond max_sessions",
        blocked=second.is_error and refused_reset.status_code == 503,
    )
    assert health["active_sessions"] == 1  # the MCP call in flight holds the one slot
    assert refused_reset.status_code == 503
    assert second.is_error and "capacity" in second.content[0].text


# ---- tasks by id only --------------------------------------------------------------------------------------


def _harness_app(tmp_path: Path, **security: Any) -> Any:
    """The pi harness env, served; no sandbox is ever made (a reset that got that far answers 400)."""
    from openenv.errors import Unsupported
    from openenv.harness.environment import EpisodeHooks, HarnessEnvironment
    from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState

    reached = tmp_path / "reached-the-sandbox"

    def no_sandbox(ports: tuple[int, ...]) -> Any:
        reached.write_text("yes")
        raise Unsupported("this test starts no sandbox")

    class Capture:  # the env asks its capture server for a port before making the sandbox
        port = 1

        def open_session(self, **_: Any) -> Any:
            raise Unsupported("no capture in this test")

        def close_session(self, token: str) -> None: ...

    app = create_app(
        lambda: HarnessEnvironment(
            "pi",
            server=Capture(),
            hooks=EpisodeHooks(sandbox_factory=no_sandbox),  # type: ignore[arg-type]
        ),
        action_type=HarnessAction,
        observation_type=HarnessObservation,
        state_type=HarnessState,
        security=ServerSecurity(**security),
    )
    return app, reached


def _inline_task(tmp_path: Path) -> dict[str, Any]:
    return {
        "id": "x",
        "instruction": "i",
        "tests": {"t.sh": "true"},
        "solution": "true",
        "workspace": {"../../../../tmp/openenv-attack-key": "pwned"},
        "test_command": f"id > {tmp_path / 'ran-as'}",
    }


async def test_an_inline_task_over_the_wire_is_refused_unless_the_server_allows_it(
    tmp_path: Path, figures: Any
) -> None:
    app, reached = _harness_app(tmp_path)
    with LocalServer(app) as server:
        r = httpx.post(
            f"{server.base_url}/reset",
            json={"options": {"task": _inline_task(tmp_path)}},
            headers=server.headers,
        )
        async with connect(ws(server), additional_headers=server.headers) as sock:
            await sock.send(
                json.dumps({"type": "reset", "data": {"options": {"task": _inline_task(tmp_path)}}})
            )
            frame = json.loads(await sock.recv())
    blocked = r.status_code == 400 and frame["type"] == "error" and not reached.exists()
    figures.record(attack="reset with an inline Task (test_command, ../ keys)", blocked=blocked)
    assert r.status_code == 400 and "--allow-inline-tasks" in r.json()["error"]["message"]
    assert frame["data"]["code"] == "bad_request"
    assert not reached.exists() and not (tmp_path / "ran-as").exists()
    assert not Path("/tmp/openenv-attack-key").exists()

    allowed, reached = _harness_app(tmp_path, allow_inline_tasks=True)
    with LocalServer(allowed) as server:  # the explicit opt-in gets as far as the sandbox
        task = _inline_task(tmp_path) | {"workspace": {}}
        r = httpx.post(f"{server.base_url}/reset", json={"options": {"task": task}}, headers=server.headers)
    assert r.status_code == 400 and "starts no sandbox" in r.json()["error"]["message"] and reached.exists()


@pytest.mark.parametrize("task", ["../../etc/passwd", "/etc/passwd", "a/b"])
def test_a_task_id_that_is_a_path_is_refused(tmp_path: Path, task: str, figures: Any) -> None:
    app, reached = _harness_app(tmp_path)
    with LocalServer(app) as server:
        r = httpx.post(f"{server.base_url}/reset", json={"options": {"task": task}}, headers=server.headers)
    figures.record(attack=f"reset task={task!r}", blocked=r.status_code == 400 and not reached.exists())
    assert r.status_code == 400 and not reached.exists()


def test_the_echo_action_still_works_through_every_guard(echo: LocalServer) -> None:
    """The guards cost nothing to an honest client: reset, step, state over HTTP with the token."""
    sid = httpx.post(f"{echo.base_url}/reset", json={}, headers=echo.headers).json()["session_id"]
    r = httpx.post(
        f"{echo.base_url}/step",
        json={"action": EchoAction(message="hi").model_dump()},
        headers={**echo.headers, "X-Session-Id": sid},
    )
    assert EchoObservation.model_validate(r.json()["observation"]).echoed_message == "hi"


def test_a_task_set_is_one_the_operator_offers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    """A client may not point reset at a folder of its choosing (its tasks' commands would run here)."""
    from openenv.harness.tasks.builtin import BUILTIN_DIR

    app, reached = _harness_app(tmp_path)
    offered = str(BUILTIN_DIR / "fix-temperature-conversion")
    monkeypatch.setenv("OPENENV_TASK_SETS", offered)
    with LocalServer(app) as server:
        refused = httpx.post(
            f"{server.base_url}/reset",
            json={"options": {"task": "x", "task_set": str(tmp_path)}},
            headers=server.headers,
        )
        assert not reached.exists()
        offered_reset = httpx.post(
            f"{server.base_url}/reset",
            headers=server.headers,
            json={"options": {"task": "fix-temperature-conversion", "task_set": offered}},
        )
    figures.record(attack="reset with task_set=<a client's folder>", blocked=refused.status_code == 400)
    assert refused.status_code == 400 and "task_set" in refused.json()["error"]["message"]
    assert "starts no sandbox" in offered_reset.json()["error"]["message"] and reached.exists()


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("[::1]:8000", True),
        ("127.0.0.2:8000", True),
        ("10.1.2.3", True),  # an IP literal cannot be rebound: the page would have to come from that address
        ("evil.example:8000", False),
        ("127.0.0.1.nip.io:8000", False),
        ("localhost.evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_the_host_check_refuses_names_it_was_not_given(host: str | None, served: bool) -> None:
    assert ServerSecurity().host_allowed(host) is served
    assert ServerSecurity(allowed_hosts=("owner-env.hf.space",)).host_allowed("owner-env.hf.space") is True
