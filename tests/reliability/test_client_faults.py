"""Client faults: a trainer that vanishes mid-episode must not leave a harness, a sandbox or a capture
session behind. A real `pi` harness is parked mid-episode behind a served `HarnessEnvironment` (the
`openenv serve` app on a real uvicorn socket); the client then dies without a goodbye (SIGKILL of its
process, or a TCP reset with no close frame), and we time how long the server takes to free all three.
An HTTP client that simply stops calling is left to the idle reaper, timed the same way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from websockets.sync.client import connect

from openenv.capture.server import CaptureServer
from openenv.core.auth import TOKEN_ENV, auth_headers, token_for
from openenv.harness.catalog import get_spec
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.install import install_status
from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState
from openenv.harness.sandbox.local import sandboxed_processes
from openenv.harness.sandbox.sweeper import OWNER_LABEL, owner_label
from openenv.server import LocalServer, create_app

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HARNESS = "pi"
TASK = "fix-paginate-off-by-one"
FREED_WITHIN_S = 10.0  # "within seconds": ~2 s measured; the margin is for a machine at load 14 on 2 cores

# A trainer in its own process: reset (the harness parks at its first model request), optionally send a
# step whose tool call keeps the harness busy for minutes, then hang until it is killed.
CLIENT = r"""
import sys, time
from openenv.client.env_client import EnvClient
from openenv.harness.catalog import get_spec
from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState
from openenv.harness.oracle import fill_required, hermes_tool_call

class HarnessClient(EnvClient[HarnessAction, HarnessObservation, HarnessState]):
    pass

url, harness, task, command = sys.argv[1:5]
with HarnessClient.from_url(url).sync() as client:
    obs = client.reset(task=task)
    print("parked", flush=True)
    if command:
        shell = get_spec(harness).shell_tool
        tool = next((t for t in obs.pending.request.tools if t.name == shell.name), None)
        text = hermes_tool_call(shell.name, fill_required(shell.call_arguments(command), tool))
        print("stepping", flush=True)
        client.step(HarnessAction(kind="complete", text=text))
    time.sleep(600)
"""


@pytest.fixture
def capture(make_proxy: Callable[..., CaptureServer]) -> CaptureServer:
    """The capture proxy the served harness envs share (its open sessions are one of the things freed)."""
    if not install_status(get_spec(HARNESS)).ready:
        pytest.skip(f"{HARNESS} is not installed; run scripts/install_harnesses.sh {HARNESS}")
    return make_proxy()


def our_containers() -> list[str]:
    """Sandbox containers (live or not) that this test process started."""
    import docker

    engine = docker.from_env()
    try:
        label = f"{OWNER_LABEL}={owner_label()}"
        return [c.short_id for c in engine.containers.list(all=True, sparse=True, filters={"label": label})]
    finally:
        engine.close()


def require_docker() -> None:
    from openenv.harness.sandbox.docker import engine_available

    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)  # cached by recipe


@pytest.fixture
def served(capture: CaptureServer) -> Iterator[Callable[..., str]]:
    """`served(idle_timeout_s=..., sandbox=...)` -> base URL of a harness env server, as `openenv serve`
    builds it."""
    servers: list[LocalServer] = []

    def serve(idle_timeout_s: float | None = 600.0, sandbox: str = "local") -> str:
        def factory() -> HarnessEnvironment:
            return HarnessEnvironment(
                HARNESS, server=capture, settings=EpisodeSettings.model_validate({"sandbox": sandbox})
            )

        app = create_app(
            factory,
            action_type=HarnessAction,
            observation_type=HarnessObservation,
            state_type=HarnessState,
            idle_timeout_s=idle_timeout_s,
        )
        servers.append(LocalServer(app).start())
        return servers[-1].base_url

    yield serve
    for server in servers:
        server.stop()
    assert sandboxed_processes() == [], "a sandbox outlived its server"


def what_is_held(url: str, capture: CaptureServer, docker: bool = False) -> dict[str, int]:
    sessions = httpx.get(f"{url}/health", timeout=10).json()["active_sessions"]
    held = {
        "env_sessions": sessions,
        "proxy_sessions": len(capture.registry.sessions),
        "sandbox_processes": len(sandboxed_processes()),
    }
    if docker:
        held["containers"] = len(our_containers())
    return held


def seconds_until_freed(
    url: str, capture: CaptureServer, since: float, docker: bool = False, limit_s: float = 60.0
) -> float:
    """Poll until no env session, proxy session, sandboxed process or container is left; the seconds."""
    while time.monotonic() - since < limit_s:
        if not any(what_is_held(url, capture, docker).values()):
            return time.monotonic() - since
        time.sleep(0.05)
    pytest.fail(f"still held {limit_s:g} s after the client left: {what_is_held(url, capture, docker)}")


def start_client(url: str, command: str = "") -> subprocess.Popen[str]:
    """The trainer process, given the server's token the way a remote client gets it: `$OPENENV_TOKEN`."""
    env = {**os.environ, TOKEN_ENV: token_for(url) or ""}
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, url, HARNESS, TASK, command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_a_killed_client_process_frees_session_sandbox_and_proxy_session(
    served: Callable[..., str],
    capture: CaptureServer,
    read_until: Callable[..., str],
    figures: Any,
    sandbox: str,
) -> None:
    docker = sandbox == "docker"
    if docker:
        require_docker()
    url = served(sandbox=sandbox)
    client = start_client(url)
    try:
        read_until(client, "parked")
        held = what_is_held(url, capture, docker)
        assert held["env_sessions"] == 1 and held["proxy_sessions"] == 1
        assert held.get("containers", 1) == 1 and (docker or held["sandbox_processes"] > 0), held
        killed = time.monotonic()
        client.send_signal(signal.SIGKILL)
    finally:
        client.kill()
        client.wait(10)
    seconds = seconds_until_freed(url, capture, killed, docker)
    assert seconds < FREED_WITHIN_S
    figures.record(seconds_to_free=round(seconds, 2), held_before=held)


def test_a_reset_connection_without_a_close_frame_frees_everything(
    served: Callable[..., str], capture: CaptureServer, figures: Any
) -> None:
    url = served()
    with connect(
        url.replace("http://", "ws://") + "/ws",
        open_timeout=30,
        proxy=None,
        additional_headers=auth_headers(url),
    ) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"options": {"task": TASK}}}))
        assert '"type":"observation"' in str(ws.recv(timeout=240))
        held = what_is_held(url, capture)
        assert held["env_sessions"] == 1 and held["sandbox_processes"] > 0
        ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        dropped = time.monotonic()
        ws.socket.close()
    seconds = seconds_until_freed(url, capture, dropped)
    assert seconds < FREED_WITHIN_S
    figures.record(seconds_to_free=round(seconds, 2), processes_before=held["sandbox_processes"])


def test_a_client_killed_during_a_long_step_is_noticed_while_the_step_runs(
    served: Callable[..., str], capture: CaptureServer, read_until: Callable[..., str], figures: Any
) -> None:
    url = served()
    client = start_client(url, command="sleep 300")  # the step would return only after 5 minutes
    try:
        read_until(client, "stepping")
        deadline = time.monotonic() + 60
        while not any("sleep" in " ".join(p.cmdline()) for p in _safe(sandboxed_processes())):
            assert time.monotonic() < deadline, "the harness never ran the tool call"
            time.sleep(0.1)
        killed = time.monotonic()
        client.send_signal(signal.SIGKILL)
    finally:
        client.kill()
        client.wait(10)
    seconds = seconds_until_freed(url, capture, killed)
    assert seconds < FREED_WITHIN_S
    figures.record(seconds_to_free=round(seconds, 2), step_would_have_taken_s=300)


def test_an_abandoned_http_session_is_reaped_when_idle(
    served: Callable[..., str], capture: CaptureServer, figures: Any
) -> None:
    idle_timeout_s = 2.0
    url = served(idle_timeout_s=idle_timeout_s)
    reply = httpx.post(
        f"{url}/reset", json={"options": {"task": TASK}}, headers=auth_headers(url), timeout=240
    )
    assert reply.status_code == 200, reply.text
    left = time.monotonic()  # the client never calls again
    assert what_is_held(url, capture)["sandbox_processes"] > 0
    seconds = seconds_until_freed(url, capture, left)
    assert idle_timeout_s <= seconds < idle_timeout_s + FREED_WITHIN_S
    sid = reply.json()["session_id"]
    gone = httpx.get(f"{url}/state", headers={"X-Session-Id": sid, **auth_headers(url)}, timeout=10)
    assert gone.status_code == 401
    figures.record(idle_timeout_s=idle_timeout_s, seconds_to_free=round(seconds, 2))


def _safe(procs: list[psutil.Process]) -> Iterator[psutil.Process]:
    for proc in procs:
        try:
            proc.cmdline()
        except psutil.Error:
            continue
        yield proc
