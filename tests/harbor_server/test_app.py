"""The Harbor server's app in process: the Task API's shapes, the discovery rule, and every rollout behind
the token whatever discovery allows (the reference's client is checked against it in tests/interop/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse

from openenv.capture.engine import EngineSpec
from openenv.harbor_server import HarborService, RolloutPolicy, Splits, build_harbor_app
from openenv.harness.tasks import builtin_tasks
from openenv.server.security import ServerSecurity

TOKEN = "t0k"


def _app(open_discovery: bool) -> TestClient:
    service = HarborService(
        splits=Splits.load(["builtin"]), policy=RolloutPolicy(engine=EngineSpec(backend="local"))
    )
    security = ServerSecurity.for_bind("0.0.0.0", token=TOKEN, allowed_hosts=["127.0.0.1", "testserver"])
    return TestClient(
        build_harbor_app(service, security=security, open_discovery=open_discovery),
        base_url="http://127.0.0.1",
    )


@pytest.fixture
def open_app() -> Iterator[TestClient]:
    with _app(True) as client:
        yield client


def test_task_api_answers_in_the_references_shapes(open_app: TestClient) -> None:
    tasks = builtin_tasks()
    assert open_app.get("/harbor_env/splits").json() == [{"name": "builtin", "num_tasks": len(tasks)}]
    assert open_app.post("/harbor_env/num_tasks", json={"split": ""}).json() == {"num_tasks": len(tasks)}
    task = open_app.post("/harbor_env/task", json={"split": "builtin", "index": 1}).json()["task"]
    assert task == {
        "index": 1,
        "task_id": tasks[1].id,
        "task_name": tasks[1].id,
        "dataset": "builtin",
        "instruction": tasks[1].instruction.strip(),
    }
    window = open_app.post("/harbor_env/task_range", json={"split": "builtin", "start": 1, "stop": 3}).json()[
        "tasks"
    ]
    assert [t["index"] for t in window] == [1, 2]
    assert open_app.post("/harbor_env/task", json={"split": "", "index": 10_000}).status_code == 400
    unknown = open_app.post("/harbor_env/num_tasks", json={"split": "nope"})
    assert unknown.status_code == 404 and "builtin" in unknown.json()["error"]["message"]
    assert open_app.get("/list_environments").json() == ["harbor_env"]


def test_open_discovery_keeps_rollouts_and_capabilities_behind_the_token(open_app: TestClient) -> None:
    """Discovery open: the Task API answers without a header, but MCP (the rollout road) and the WebSocket do
    not; with the token they do."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "capabilities", "arguments": {}},
    }
    assert open_app.post("/mcp", json=call).status_code == 401
    assert (
        open_app.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
        ).status_code
        == 401
    )
    with pytest.raises(WebSocketDenialResponse) as denied, open_app.websocket_connect("/ws"):
        pass  # the handshake is refused before the socket opens
    assert denied.value.status_code == 401
    with open_app.websocket_connect("/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_json(
            {"type": "step", "data": {"type": "call_tool", "tool_name": "capabilities", "arguments": {}}}
        )
        assert "local" in ws.receive_json()["data"]["observation"]["result"]
    answer = open_app.post("/mcp", json=call, headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert "local" in answer["result"]["content"][0]["text"]


def test_closed_discovery_needs_the_token() -> None:
    with _app(False) as client:
        assert client.get("/harbor_env/splits").status_code == 401
        assert client.post("/harbor_env/task", json={"split": "", "index": 0}).status_code == 401
        assert (
            client.get("/harbor_env/splits", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        )
