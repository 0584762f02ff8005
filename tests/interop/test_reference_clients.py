"""The reference OpenEnv's own clients (`openenv==0.10.0`, its own venv) drive our servers.

Each test starts one of our servers on a free loopback port and runs a script under the reference's
interpreter (the `reference` fixture): its `GenericEnvClient` on `openenv serve echo` and on the pi
harness env (a whole episode with the oracle's replies as actions, reward 1), its `MCPToolClient` on
pi's tools, and its `openenv validate --url`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.core.net import free_port, wait_for_health
from openenv.harness.catalog import get_spec
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.oracle import AUX_TEXT, FINAL_TEXT, OraclePolicy, hermes_tool_call
from openenv.harness.tasks import builtin_task
from openenv.harness.tasks.model import Task
from openenv.server import LocalServer, create_app
from tests.harness.e2e.conftest import require_installed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def echo_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`openenv serve echo --no-token` as a subprocess (the command a user runs), on a free port."""
    port = free_port()
    log = tmp_path_factory.mktemp("echo-serve") / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv.cli.main", "serve", "echo", "--no-token", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(
            url,
            timeout_s=60,
            gone=lambda: (
                None
                if proc.poll() is None
                else f"openenv serve exited ({proc.returncode}):\n{log.read_text()}"
            ),
        )
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_generic_client_reads_echo_observations_and_errors(reference: Any, echo_served: str) -> None:
    """Reset, step and state through the reference's `GenericEnvClient`: the fields arrive under
    `observation` (they used to arrive as `{}`), reward and done beside them. A bad action comes back as
    the reference's error frame (`message` and `code`), which its client raises as `RuntimeError` naming
    both, and the session stays usable. (One script: the reference's interpreter takes seconds to start.)"""
    out = reference.run(f"""
        import json
        from openenv.core.generic_client import GenericEnvClient
        with GenericEnvClient(base_url={echo_served!r}).sync() as env:
            first = env.reset(episode_id="ref-1")
            step = env.step({{"message": "hello"}})
            state = env.state()
            try:
                env.step({{"mesage": "typo"}})
                error = None
            except RuntimeError as exc:
                error = str(exc)
            after = env.step({{"message": "ok"}})
        print(json.dumps({{"first": [first.observation, first.reward, first.done],
                          "step": [step.observation, step.reward, step.done], "state": state,
                          "error": error, "after": after.observation["echoed_message"]}}))
    """)
    assert out["first"] == [{"echoed_message": "", "message_length": 0, "metadata": {}}, None, False]
    assert out["step"][0]["echoed_message"] == "hello" and out["step"][0]["message_length"] == 5
    assert out["step"][1] == pytest.approx(0.5) and out["step"][2] is False
    assert out["state"]["episode_id"] == "ref-1" and out["state"]["step_count"] == 1
    assert "action field 'mesage'" in out["error"] and "(code: invalid_action)" in out["error"]
    assert out["after"] == "ok"


def test_reference_validate_url_passes_on_our_server(reference: Any, echo_served: str) -> None:
    """The reference's `openenv validate --url` (it cannot send a token: `--no-token` server): every
    criterion, including `POST /mcp` with `{}` answered as a JSON-RPC error with status 200."""
    proc = reference.cli("validate", "--url", echo_served, "--json")
    report = json.loads(proc.stdout)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"], failed
    assert {c["id"] for c in report["criteria"]} >= {
        "health_endpoint",
        "metadata_endpoint",
        "schema_endpoint",
        "mcp_endpoint",
        "mode_endpoint_consistency",
    }


TASK = "fix-paginate-off-by-one"


@pytest.fixture(scope="module")
def pi_served(capture_server: Any) -> Iterator[LocalServer]:
    """Our pi harness env on a free port, with a token (the default), sharing the suite's capture proxy
    (tiny model, local backend). A class, not a lambda, so `/mcp` serves the harness env's tools."""

    class SharedPi(HarnessEnvironment):
        harness = "pi"

        def __init__(self) -> None:
            super().__init__(server=capture_server)

    with LocalServer(create_app(SharedPi)) as server:
        yield server


def _oracle_replies(task: Task) -> dict[str, Any]:
    """The oracle's replies for pi, composed by `openenv.harness.oracle` (hermes tool calls of pi's own
    shell tool, then the final text); the reference-side script picks one by the tool results so far,
    as `OraclePolicy.reply` does."""
    spec = get_spec("pi")
    assert not spec.shell_tool.in_text and spec.finish_tool is None  # the script's choice below covers pi
    plan = OraclePolicy(spec, task, look_first=True).plan
    calls = [hermes_tool_call(spec.shell_tool.name, spec.shell_tool.call_arguments(cmd)) for cmd in plan]
    return {"calls": calls, "final": FINAL_TEXT, "aux": AUX_TEXT}


@pytest.mark.slow
def test_pi_episode_driven_only_by_the_reference_client_reaches_reward_1(
    reference: Any, pi_served: LocalServer
) -> None:
    """A whole scored episode: `reset(task=..., task_set=..., policy="oracle", seed=..., episode_id=...)`
    as keywords, the oracle's replies sent as `complete` actions by the reference's `GenericEnvClient`
    (our token passed with `headers=`), and what a trainer needs in every observation: prompt text and
    ids, the last reply with its logprobs, turn and tool-call counts; at the end reward 1 beside the
    observation, and the training rows."""
    require_installed("pi")
    replies = _oracle_replies(builtin_task(TASK))
    out = reference.run(
        f"""
        import json
        from openenv.core.generic_client import GenericEnvClient
        replies = json.loads({json.dumps(json.dumps(replies))})
        headers = {{"Authorization": "Bearer {pi_served.token}"}}
        seen = []
        with GenericEnvClient(base_url={pi_served.base_url!r}, headers=headers, message_timeout_s=300).sync() as env:
            result = env.reset(task={TASK!r}, task_set="builtin", policy="oracle", seed=0, episode_id="ref-pi-1")
            state = env.state()
            while not result.done:
                obs = result.observation
                pending = obs["pending"]
                seen.append({{"prompt_ids": len(pending["prompt_ids"]), "text": pending["text"][-200:],
                              "turns": obs["turns"], "tool_calls": obs["tool_calls"],
                              "last_logprobs": len((obs["last_turn"] or {{}}).get("logprobs", [])),
                              "last_ids": len((obs["last_turn"] or {{}}).get("token_ids", []))}})
                request = pending["request"]
                results = sum(1 for m in request["messages"] if m["role"] == "tool")
                if pending["aux"] or not request["tools"]:
                    text = replies["aux"]
                elif results < len(replies["calls"]):
                    text = replies["calls"][results]
                else:
                    text = replies["final"]
                result = env.step({{"kind": "complete", "text": text}})
            end = result.observation
        print(json.dumps({{"reward": result.reward, "done": result.done, "state": state, "seen": seen,
                          "breakdown": end["reward_breakdown"], "turns": end["turns"],
                          "tool_calls": end["tool_calls"], "rows": len(end["sequences"] or []),
                          "row_keys": sorted((end["sequences"] or [{{}}])[0])}}))
    """,
        timeout=600,
    )
    assert out["reward"] == 1.0 and out["done"] is True, out
    assert out["breakdown"]["tests_passed"] == 3
    assert out["state"]["task_id"] == TASK and out["state"]["harness"] == "pi"
    assert out["state"]["episode_id"] == "ref-pi-1"
    first = out["seen"][0]
    assert first["prompt_ids"] > 0 and first["text"]  # the prompt as ids and as rendered text
    later = out["seen"][-1]
    assert later["last_ids"] > 0 and later["last_logprobs"] == later["last_ids"]  # the last reply, scored
    assert later["tool_calls"] >= 1 and later["turns"] >= 2
    assert out["tool_calls"] == len(replies["calls"]) and out["rows"] >= 1
    assert {"prompt_ids", "completion_ids", "logprobs"} <= set(out["row_keys"])


def test_reference_mcp_tool_client_lists_and_calls_pi_tools(reference: Any, pi_served: LocalServer) -> None:
    """The reference's `MCPToolClient`: `openenv/session/create` on `POST /mcp`, its WebSocket attached to
    that session, `tools/list` and `tools/call` naming it, `openenv/session/close` at the end."""
    out = reference.run(f"""
        import asyncio, json
        from openenv.core.mcp_client import MCPToolClient
        async def main():
            headers = {{"Authorization": "Bearer {pi_served.token}"}}
            async with MCPToolClient(base_url={pi_served.base_url!r}, headers=headers) as env:
                tools = await env.list_tools()
                tasks = await env.call_tool("list_tasks")
                try:
                    await env.call_tool("list_tasks", task_set="no-such-set")
                    refused = None
                except RuntimeError as exc:
                    refused = str(exc)
                session = env._production_session_id
            return {{"tools": sorted(t.name for t in tools), "tasks": tasks, "refused": refused,
                    "session": session}}
        print(json.dumps(asyncio.run(main())))
    """)
    assert {"list_tasks", "list_harnesses", "run_episode", "get_trajectory"} <= set(out["tools"])
    assert TASK in {t["id"] for t in out["tasks"]}
    assert "no-such-set" in out["refused"]
    assert out["session"]
    assert _sessions_drain(pi_served.base_url)  # the client's close released the session it created


def _sessions_drain(url: str, timeout_s: float = 10.0) -> bool:
    """Whether the server's live sessions reach 0 within `timeout_s` (the WebSocket's end is processed a
    moment after the client returns)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/health").json()["active_sessions"] == 0:
            return True
        time.sleep(0.05)
    return False
