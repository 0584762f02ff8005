"""The reference OpenEnv's MCP flow on our server: plain JSON-RPC on `POST /mcp` and in the WebSocket's
`mcp` message, sessions made with `openenv/session/create` and attached with `/ws?session_id=`.

(The reference's own clients run this flow in tests/interop; these tests pin each answer's shape.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.server.test_mcp import ToolEchoEnvironment
from tests.server.test_ws import ask, connect, ws_url


def rpc(http: httpx.Client, url: str, method: str, rid: int = 1, **params: Any) -> dict[str, Any]:
    r = http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": method, "params": params, "id": rid})
    assert r.status_code == 200
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(("body", "code"), [(b"{}", -32600), (b"not json", -32700), (b"[1]", -32600)])
def test_a_bad_request_is_a_json_rpc_error_with_status_200(
    http: httpx.Client, echo_url: str, body: bytes, code: int
) -> None:
    """What the reference's `validate --url` checks with `POST /mcp {}`: 200 and a JSON-RPC payload."""
    r = http.post(f"{echo_url}/mcp", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["jsonrpc"] == "2.0" and r.json()["error"]["code"] == code


def test_tools_list_and_call_over_plain_json_rpc(http: httpx.Client, serve: Any) -> None:
    url = serve(ToolEchoEnvironment)
    listed = rpc(http, url, "tools/list")["result"]["tools"]
    assert {t["name"] for t in listed} == {"count_words", "shout"}
    assert listed[0]["inputSchema"]["type"] == "object"
    called = rpc(http, url, "tools/call", name="count_words", arguments={"text": "a bb ccc"})["result"]
    assert called["data"] == {"words": 3, "longest": "ccc"} and called["isError"] is False
    assert rpc(http, url, "tools/call", name="shout", arguments={"text": "hi"})["result"]["data"] == "HI"
    failed = rpc(http, url, "tools/call", name="count_words", arguments={"text": " "})
    assert failed["error"]["code"] == -32603 and "at least one" in failed["error"]["message"]
    assert rpc(http, url, "tools/call", name="nope")["error"]["code"] == -32602
    assert rpc(http, url, "resources/list")["error"]["code"] == -32601


def test_a_created_session_is_attached_by_a_websocket_and_closed_by_rpc(
    http: httpx.Client, echo_url: str
) -> None:
    """`openenv/session/create` holds an env instance; `/ws?session_id=` drives it; the socket's end
    leaves it open for `openenv/session/close`, as the reference's `MCPToolClient` expects."""
    sid = rpc(http, echo_url, "openenv/session/create")["result"]["session_id"]
    assert http.get(f"{echo_url}/health").json()["active_sessions"] == 1
    assert rpc(http, echo_url, "tools/list", session_id=sid)["result"] == {"tools": []}
    assert rpc(http, echo_url, "tools/list", session_id="nope")["error"]["code"] == -32602

    async def drive() -> None:
        async with connect(f"{ws_url(echo_url)}?session_id={sid}") as ws:
            await ask(ws, {"type": "reset", "data": {"episode_id": "attached"}})
            await ask(ws, {"type": "step", "data": {"message": "x"}})
            await ask(ws, {"type": "close"})

    asyncio.run(drive())
    assert http.get(f"{echo_url}/state", headers={"X-Session-Id": sid}).json()["episode_id"] == "attached"
    assert rpc(http, echo_url, "openenv/session/close", session_id=sid)["result"] == {
        "session_id": sid,
        "closed": True,
    }
    assert http.get(f"{echo_url}/health").json()["active_sessions"] == 0
    assert rpc(http, echo_url, "openenv/session/close", session_id=sid)["error"]["code"] == -32602


async def test_attaching_to_an_unknown_session_is_refused(echo_url: str) -> None:
    async with connect(f"{ws_url(echo_url)}?session_id=never-issued") as ws:
        reply = json.loads(await ws.recv())
        assert reply["type"] == "error" and reply["data"]["code"] == "unknown_session"
        with pytest.raises(ConnectionClosed):
            await ws.recv()


async def test_the_websocket_mcp_message_answers_json_rpc_for_its_own_session(serve: Any) -> None:
    url = serve(ToolEchoEnvironment)
    async with connect(ws_url(url)) as ws:
        created = await ask(
            ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "openenv/session/create", "id": 1}}
        )
        assert created["type"] == "mcp" and created["data"]["result"]["session_id"]
        own = created["data"]["result"]["session_id"]
        closing = await ask(
            ws,
            {
                "type": "mcp",
                "data": {
                    "jsonrpc": "2.0",
                    "method": "openenv/session/close",
                    "params": {"session_id": own},
                    "id": 2,
                },
            },
        )
        assert closing["data"]["error"]["code"] == -32600  # not the socket's own session
        called = await ask(
            ws,
            {
                "type": "mcp",
                "data": {
                    "jsonrpc": "2.0",
                    "method": "tools/call",
                    "id": 3,
                    "params": {"name": "shout", "arguments": {"text": "a"}},
                },
            },
        )
        assert called["data"]["id"] == 3 and called["data"]["result"]["data"] == "A"
        bad = await ask(ws, {"type": "mcp", "data": {}})
        assert bad["type"] == "mcp" and bad["data"]["error"]["code"] == -32600
        still = await ask(ws, {"type": "reset"})
        assert still["type"] == "observation"


async def test_reset_keywords_travel_flat_as_the_reference_sends_them(echo_url: str) -> None:
    """`reset` data are the env's reset keywords (`max_steps` is echo's); the older `options` object
    still works, and naming a keyword both ways is refused."""
    async with connect(ws_url(echo_url)) as ws:
        await ask(ws, {"type": "reset", "data": {"max_steps": 2, "episode_id": "kw"}})
        assert (await ask(ws, {"type": "state"}))["data"]["max_steps"] == 2
        await ask(ws, {"type": "reset", "data": {"options": {"max_steps": 3}}})
        assert (await ask(ws, {"type": "state"}))["data"]["max_steps"] == 3
        clash = await ask(ws, {"type": "reset", "data": {"max_steps": 1, "options": {"max_steps": 3}}})
        assert clash["data"]["code"] == "bad_request" and "given both" in clash["data"]["message"]
        unknown = await ask(ws, {"type": "reset", "data": {"difficulty": "hard"}})
        assert unknown["data"]["code"] == "bad_request" and "max_steps" in unknown["data"]["message"]


def test_http_step_takes_the_references_optional_fields(http: httpx.Client, echo_url: str) -> None:
    sid = http.post(f"{echo_url}/reset", json={"max_steps": 1}).json()["session_id"]
    r = http.post(
        f"{echo_url}/step",
        json={"action": {"message": "hi"}, "timeout_s": 5, "request_id": "r1"},
        headers={"X-Session-Id": sid},
    )
    assert (
        r.status_code == 200
        and r.json()["done"] is True
        and r.json()["observation"]["echoed_message"] == "hi"
    )
