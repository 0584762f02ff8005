"""Env-server throughput: ours vs the reference `openenv==0.10.0`, echo env, same client, same run.

    .venv/bin/python bench/bench_server.py [--seconds 2] [--rounds 3] [--clients 1,16]

Measures WebSocket step round trips/s and HTTP steps/s at each client count, and the server process's
CPU-ms per op (psutil, user+system, over the measured window). Every server is a subprocess with 64
sessions allowed (the reference's default cap is 1, which refuses a second client). Rows:

  reference          openenv==0.10.0 as installed: asyncio loop, h11 (it does not depend on uvloop)
  reference-uvloop   the same, given uvloop + httptools (installed into its venv by this script)
  ours-same-stack    ours on asyncio + h11, the reference's stack
  ours-threaded      ours on asyncio + h11 with echo forced through the worker-thread pool
                     (`blocking = True`), as the reference runs every sync env
  ours               ours as shipped: uvloop + httptools (core dependencies), echo inline

The reference lives in its own venv under `.cache/bench/ref-venv` (its import name clashes with ours);
its echo env is its own `openenv init` template. Load: one uvloop process with `websockets` / `aiohttp`
(httpx costs more client CPU per request than these servers do, so it would measure itself), identical
frames for every server; rounds interleave the servers so background load on this shared machine hits
all alike, and the median round is reported. Ours keeps HTTP sessions (reset once, then steps with
X-Session-Id); the reference's HTTP step is stateless (a fresh env per call), its only HTTP mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import aiohttp
import httpx
import psutil
import uvloop
from websockets.asyncio.client import connect

REPO = Path(__file__).resolve().parents[1]
REF_VENV = REPO / ".cache" / "bench" / "ref-venv"
REF_VERSION = "0.10.0"
STEP_ACTION = {"message": "hello"}

OURS = """
import uvicorn
from echo_env import EchoEnvironment
from openenv.server import create_app

class ThreadedEcho(EchoEnvironment):
    blocking = True  # the shipped echo runs inline; this row pays the worker-thread hop like the reference

env = ThreadedEcho if {threaded} else EchoEnvironment
uvicorn.run(create_app(env, max_sessions=64), host="127.0.0.1", port={port},
            log_level="warning", loop="{loop}", http="{http}", ws="websockets-sansio")
"""

# The reference's own echo env: its `openenv init` template (cli/templates/openenv_env), un-templated.
REFERENCE = """
from uuid import uuid4
import uvicorn
from pydantic import Field
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

class EchoAction(Action):
    message: str = Field(..., description="Message to echo back")

class EchoObservation(Observation):
    echoed_message: str = Field(default="")
    message_length: int = Field(default=0)

class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", message_length=0, done=False, reward=0.0)

    def step(self, action):
        self._state.step_count += 1
        return EchoObservation(echoed_message=action.message, message_length=len(action.message),
                               done=False, reward=min(len(action.message) * 0.1, 1.0))

    @property
    def state(self):
        return self._state

app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=64)
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", loop="{loop}", http="{http}")
"""


@dataclass
class Server:
    name: str
    python: Path
    script: str
    stateful_http: bool
    loop: str = "asyncio"
    http: str = "h11"
    threaded: bool = False

    def start(self) -> tuple[subprocess.Popen[bytes], str]:
        port = _free_port()
        code = textwrap.dedent(self.script).format(
            port=port, loop=self.loop, http=self.http, threaded=self.threaded
        )
        log = tempfile.NamedTemporaryFile(prefix=f"bench-{self.name}-", suffix=".log", delete=False)  # noqa: SIM115 (the server keeps it)
        proc = subprocess.Popen(
            [str(self.python), "-c", code], stdout=log, stderr=subprocess.STDOUT, cwd=tempfile.gettempdir()
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240  # cold starts on a busy shared box
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{self.name} server did not start; see {log.name}")
            time.sleep(0.2)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def ws_worker(url: str, stop_at: float) -> int:
    async with connect(url.replace("http://", "ws://") + "/ws", compression=None, ping_interval=None) as ws:
        await ws.send('{"type":"reset","data":{}}')
        await ws.recv()
        frame = json.dumps({"type": "step", "data": STEP_ACTION})
        await ws.send(frame)
        first = json.loads(await ws.recv())
        if first.get("type") != "observation":
            raise SystemExit(f"unexpected step reply from {url}: {first}")
        n = 1
        while time.perf_counter() < stop_at:
            await ws.send(frame)
            await ws.recv()
            n += 1
        return n


async def http_worker(session: aiohttp.ClientSession, url: str, stop_at: float, stateful: bool) -> int:
    headers = {}
    if stateful:
        async with session.post(f"{url}/reset", json={}) as r:
            headers["X-Session-Id"] = (await r.json())["session_id"]
    body = json.dumps({"action": STEP_ACTION}).encode()
    headers["Content-Type"] = "application/json"
    n = 0
    while time.perf_counter() < stop_at:
        async with session.post(f"{url}/step", data=body, headers=headers) as r:
            await r.read()
            if r.status != 200:
                raise SystemExit(f"HTTP step failed on {url}: {r.status}")
        n += 1
    if stateful:
        async with session.delete(f"{url}/session", headers=headers) as r:
            await r.read()
    return n


async def measure(
    server: Server, url: str, pid: int, transport: str, clients: int, seconds: float
) -> tuple[float, float]:
    """(ops/s, server CPU-ms per op) for `clients` concurrent clients over `seconds` (after a warm-up)."""
    proc = psutil.Process(pid)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def run(duration: float) -> int:
            stop_at = time.perf_counter() + duration
            if transport == "ws":
                jobs = [ws_worker(url, stop_at) for _ in range(clients)]
            else:
                jobs = [http_worker(client, url, stop_at, server.stateful_http) for _ in range(clients)]
            return sum(await asyncio.gather(*jobs))

        await run(0.5)
        cpu0, t0 = proc.cpu_times(), time.perf_counter()
        ops = await run(seconds)
        cpu1, elapsed = proc.cpu_times(), time.perf_counter() - t0
    cpu_ms = ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) * 1000
    return ops / elapsed, cpu_ms / ops


def ensure_reference_venv() -> Path:
    python = REF_VENV / "bin" / "python"
    check = (
        f"import uvloop, httptools, importlib.metadata as m; assert m.version('openenv') == '{REF_VERSION}'"
    )
    probe = [str(python), "-c", check]
    # Away from the repo: its openenv.egg-info on the cwd would answer for the reference's metadata.
    away = tempfile.gettempdir()
    if python.exists() and subprocess.run(probe, capture_output=True, check=False, cwd=away).returncode == 0:
        return python
    print(f"installing openenv=={REF_VERSION} (+ uvloop, httptools) into {REF_VENV} (once)...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], check=True)
    pins = [f"openenv=={REF_VERSION}", f"uvloop=={version('uvloop')}", f"httptools=={version('httptools')}"]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True, cwd=away)
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--transports", default="ws,http")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    transports = args.transports.split(",")
    ours = Path(sys.executable)
    ref_python = ensure_reference_venv()
    servers = [
        Server("reference", ref_python, REFERENCE, stateful_http=False),
        Server(
            "reference-uvloop", ref_python, REFERENCE, stateful_http=False, loop="uvloop", http="httptools"
        ),
        Server("ours-same-stack", ours, OURS, stateful_http=True),
        Server("ours-threaded", ours, OURS, stateful_http=True, threaded=True),
        Server("ours", ours, OURS, stateful_http=True, loop="uvloop", http="httptools"),
    ]
    running = [(server, *server.start()) for server in servers]
    samples: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    try:
        # Interleave servers within each round so background load on this shared machine hits all alike.
        for transport in transports:
            for clients in counts:
                for _ in range(args.rounds):
                    for server, proc, url in running:
                        sample = uvloop.run(measure(server, url, proc.pid, transport, clients, args.seconds))
                        samples.setdefault((server.name, transport, clients), []).append(sample)
                for server, *_ in running:
                    rate, cpu = _median(samples[(server.name, transport, clients)])
                    print(
                        f"  {server.name:14} {transport:4} x{clients:<3} {rate:9.0f} ops/s {cpu:6.3f} CPU-ms/op"
                    )
    finally:
        for _, proc, _ in running:
            proc.terminate()
            proc.wait(10)
    print_table({k: _median(v) for k, v in samples.items()}, transports, counts)


def _median(values: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)


def print_table(
    results: dict[tuple[str, str, int], tuple[float, float]], transports: list[str], counts: list[int]
) -> None:
    names = ["reference", "reference-uvloop", "ours-same-stack", "ours-threaded", "ours"]
    print("\n| transport | clients | server | ops/s | vs reference | server CPU-ms/op | vs reference |")
    print("|---|---|---|---|---|---|---|")
    for transport in transports:
        for clients in counts:
            ref_rate, ref_cpu = results[("reference", transport, clients)]
            for name in names:
                rate, cpu = results[(name, transport, clients)]
                print(
                    f"| {transport} | {clients} | {name} | {rate:,.0f} | {rate / ref_rate:.2f}x "
                    f"| {cpu:.3f} | {cpu / ref_cpu:.2f}x |"
                )
    print(
        f"\n(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        "ops = step round trips after one reset; ratios are vs the reference, measured in this run)"
    )


if __name__ == "__main__":
    main()
