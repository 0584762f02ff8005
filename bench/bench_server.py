"""Env-server throughput: ours vs the reference `openenv==0.10.0`, echo env, same client, same run.

    .venv/bin/python bench/bench_server.py [--seconds 1.5] [--rounds 5] [--clients 1,16] [--client-procs 2]
                                           [--servers reference,ours] [--json]
    .venv/bin/python bench/bench_server.py --clients 1,16,64,256 --servers reference,ours   # the sweep


Measures WebSocket step round trips/s and HTTP steps/s at each client count, the server process's
CPU-ms per op (psutil, user+system, over the measured window) and the load generator's own CPU-ms per
op, the p99 round-trip latency of the ops in the window, the server's RSS at the window's end, and
failed requests (a non-200 reply, an error frame or a dropped connection: counted, not fatal, so a
server that refuses clients at 256 shows it in the row). Every server is a subprocess with
MAX_SESSIONS (300) sessions allowed, above the largest sweep point (the reference's default cap is 1,
which refuses a second client). Rows:

  reference          openenv==0.10.0 as installed: asyncio loop, h11 (it does not depend on uvloop)
  reference-uvloop   the same, given uvloop + httptools (installed into its venv by this script)
  ours-same-stack    ours on asyncio + h11, the reference's stack
  ours-threaded      ours on asyncio + h11 with echo forced through the worker-thread pool
                     (`blocking = True`), as the reference runs every sync env
  ours               ours as shipped: uvloop + httptools (core dependencies), echo inline

The reference lives in its own venv under `.cache/reference-venv` (its import name clashes with ours);
its echo env is its own `openenv init` template. Load: `--client-procs` uvloop processes sharing the
clients, identical frames for every server. HTTP clients are one keep-alive connection each, writing
pre-built request bytes and parsing replies with httptools: aiohttp spent 0.3-0.6 ms of client CPU per
request, as much as our whole server step, and on this shared 2-core machine that cost was paid out of
the same CPU share as the server's, which diluted every HTTP ratio (16 clients: 1.6x instead of ~3x).
WebSocket clients use `websockets`. Servers and client processes each run in their own session (their
own scheduler autogroup), so neither spends the other's share. Each round measures every server back
to back in a rotating order; medians over rounds are reported, and ratios are the median of the
per-round ratios, so a burst of background load skews one round, not a row. Ours keeps HTTP sessions
(reset once, then steps with X-Session-Id); the reference's HTTP step is stateless (a fresh env per
call), its only HTTP mode.
`--json` prints one JSON object on stdout (progress goes to stderr): the run's context (python, cpus,
load_average, seconds, rounds, client_procs, reference) and `rows`, one per (transport, clients,
server) with ops_per_s, server_cpu_ms and client_cpu_ms (per op), ops_vs_reference,
server_cpu_vs_reference, client_cores, p99_ms, failed and server_rss_mb.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import httptools
import httpx
import psutil
import uvloop
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from openenv.core.net import free_port

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from servers import REF_VENV, REF_VERSION, reference_env

STEP_ACTION = {"message": "hello"}
MAX_SESSIONS = 300  # both servers' cap: above the sweep's 256 clients, so a refusal is a failure
# Our server checks a bearer token on every request (docs/security.md); every client sends it, the
# reference ignores it. Set here so that servers and client processes inherit it.
os.environ.setdefault("OPENENV_TOKEN", secrets.token_urlsafe(32))
AUTH = f"Bearer {os.environ['OPENENV_TOKEN']}"

OURS = """
import os
import uvicorn
from echo_env import EchoEnvironment
from openenv.server import create_app
from openenv.server.security import ServerSecurity

class ThreadedEcho(EchoEnvironment):
    blocking = True  # the shipped echo runs inline; this row pays the worker-thread hop like the reference

env = ThreadedEcho if {threaded} else EchoEnvironment
security = ServerSecurity(token=os.environ["OPENENV_TOKEN"])  # as served: token, Host/Origin, JSON, caps
uvicorn.run(create_app(env, max_sessions={max_sessions}, security=security), host="127.0.0.1", port={port},
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

app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs={max_sessions})
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
        port = free_port()
        code = textwrap.dedent(self.script).format(
            port=port, loop=self.loop, http=self.http, threaded=self.threaded, max_sessions=MAX_SESSIONS
        )
        log = tempfile.NamedTemporaryFile(prefix=f"bench-{self.name}-", suffix=".log", delete=False)
        # Its own session, so its own scheduler autogroup: the server does not split one CPU share
        # with the load generator on a loaded machine (measure() gives the clients theirs too).
        proc = subprocess.Popen(
            [str(self.python), "-c", code],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tempfile.gettempdir(),
            start_new_session=True,
            # a PYTHONPATH naming our tree would shadow the reference's package (same import name)
            env=None if self.python == Path(sys.executable) else reference_env(),
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


@dataclass(frozen=True)
class Window:
    """The measured interval, in `time.time()` seconds so that every client process agrees on it."""

    start: float
    stop: float

    def counts(self, now: float) -> bool:
        return self.start <= now < self.stop


class HTTPConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: write pre-built request bytes, parse the reply with httptools.

    A load generator must cost far less per request than the servers it measures.
    """

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.reply: asyncio.Future[tuple[int, bytes]] | None = None
        self.chunks: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        body, self.chunks = b"".join(self.chunks), []
        if self.reply is not None and not self.reply.done():
            self.reply.set_result((self.parser.get_status_code(), body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(ConnectionError(f"the server closed the connection: {exc}"))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.reply = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        return await self.reply


def http_request(
    method: str, path: str, host: str, body: bytes = b"", session_id: str | None = None
) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        f"Authorization: {AUTH}",
    ]
    lines.append(f"Content-Length: {len(body)}")
    if session_id is not None:
        lines.append(f"X-Session-Id: {session_id}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class Tally:
    """One client's ops inside the window, their round-trip seconds, its failures, and when it was ready."""

    ops: int = 0
    failed: int = 0
    ready: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def op(self, window: Window, sent: float, ok: bool) -> None:
        now = time.time()
        if not ok:
            self.failed += 1
        elif window.counts(now):
            self.ops += 1
            self.latencies.append(now - sent)


async def http_client(url: str, window: Window, stateful: bool) -> Tally:
    """Steps inside the window, and when the first step went out (after connecting and resetting).

    A failed request (non-200, a dropped connection) is counted; the client reconnects and goes on.
    """
    host, port = url.removeprefix("http://").split(":")
    hostport, tally = f"{host}:{port}", Tally(ready=window.stop)
    conn: HTTPConnection | None = None
    sid = None
    while time.time() < window.stop:
        try:
            if conn is None:
                _, conn = await asyncio.get_running_loop().create_connection(HTTPConnection, host, int(port))
                if stateful:
                    status, body = await conn.request(http_request("POST", "/reset", hostport, b"{}"))
                    if status != 200:
                        raise ConnectionError(f"reset: {status} {body[:200]!r}")
                    sid = json.loads(body)["session_id"]
                step = http_request(
                    "POST", "/step", hostport, json.dumps({"action": STEP_ACTION}).encode(), sid
                )
                tally.ready = time.time()
            sent = time.time()
            status, _ = await conn.request(step)
            tally.op(window, sent, status == 200)
        except (OSError, ConnectionError, ValueError, KeyError):
            tally.op(window, time.time(), False)
            if conn is not None and conn.transport is not None:
                conn.transport.close()
            conn = None
            await asyncio.sleep(0.05)
    if conn is not None and conn.transport is not None:
        if sid is not None:
            with contextlib.suppress(OSError, ConnectionError):
                await conn.request(http_request("DELETE", "/session", hostport, b"", sid))
        conn.transport.close()
    return tally


async def ws_client(url: str, window: Window) -> Tally:
    """Step round trips inside the window; an error frame or a dropped socket is a failure (reconnects)."""
    tally = Tally(ready=window.stop)
    frame = json.dumps({"type": "step", "data": STEP_ACTION})
    while time.time() < window.stop:
        try:
            async with connect(
                url.replace("http://", "ws://") + "/ws",
                compression=None,
                ping_interval=None,
                additional_headers={"Authorization": AUTH},
            ) as ws:
                await ws.send('{"type":"reset","data":{}}')
                if json.loads(await ws.recv()).get("type") == "error":
                    raise ConnectionError("reset refused")
                tally.ready = time.time()
                while time.time() < window.stop:
                    sent = time.time()
                    await ws.send(frame)
                    reply = await ws.recv()
                    tally.op(window, sent, '"observation"' in reply if isinstance(reply, str) else False)
        except (OSError, ConnectionError, WebSocketException, ValueError):
            tally.op(window, time.time(), False)
            await asyncio.sleep(0.05)
    return tally


def client_process(
    transport: str, url: str, stateful: bool, clients: int, window: Window
) -> tuple[int, float, float, list[float], int]:
    """Run `clients` clients in this (pool) process.

    Returns:
        Ops inside the window, this process's CPU-s over the window, the last client's start, the
        window's round-trip seconds, and failed requests.
    """

    async def cpu_at(when: float) -> float:
        await asyncio.sleep(max(0.0, when - time.time()))
        return time.process_time()

    async def run() -> tuple[int, float, float, list[float], int]:
        if transport == "ws":
            jobs = [ws_client(url, window) for _ in range(clients)]
        else:
            jobs = [http_client(url, window, stateful) for _ in range(clients)]
        cpu = asyncio.gather(cpu_at(window.start), cpu_at(window.stop))
        done = await asyncio.gather(*jobs)
        cpu0, cpu1 = await cpu
        latencies = [x for t in done for x in t.latencies]
        return (
            sum(t.ops for t in done),
            cpu1 - cpu0,
            max(t.ready for t in done),
            latencies,
            sum(t.failed for t in done),
        )

    return uvloop.run(run())


@dataclass(frozen=True)
class Load:
    """One measurement's load: `clients` concurrent clients split over `procs` generator processes."""

    transport: str
    clients: int
    procs: int
    seconds: float
    warmup: float


@dataclass(frozen=True)
class Sample:
    ops_per_s: float
    server_cpu_ms: float  # per op
    client_cpu_ms: float  # per op, all client processes together
    p99_ms: float = 0.0  # round trip, ops inside the window
    failed: int = 0  # requests that failed, whole run of the clients (warm-up included)
    server_rss_mb: float = 0.0  # at the window's end


def measure(pool: ProcessPoolExecutor, load: Load, server: Server, url: str, pid: int) -> Sample:
    """Apply `load` to one server and time the window after the warm-up (server CPU sampled here).

    A window that opened before every client was stepping, or saw no op complete (a stall on this
    loaded machine), is measured again with twice the warm-up.
    """
    procs = min(load.procs, load.clients)
    shares = [load.clients // procs + (i < load.clients % procs) for i in range(procs)]
    warmup = load.warmup
    while True:
        start = time.time() + warmup
        window = Window(start, start + load.seconds)
        jobs = [
            pool.submit(client_process, load.transport, url, server.stateful_http, n, window) for n in shares
        ]
        proc = psutil.Process(pid)
        time.sleep(max(0.0, window.start - time.time()))
        cpu0 = proc.cpu_times()
        time.sleep(max(0.0, window.stop - time.time()))
        cpu1 = proc.cpu_times()
        rss = proc.memory_info().rss
        results = [job.result() for job in jobs]
        ops = sum(r[0] for r in results)
        if ops and max(r[2] for r in results) <= window.start:
            break
        warmup *= 2
        if warmup > 60:
            raise SystemExit(f"{server.name}: no window with every client stepping and ops completing")
    server_ms = ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) * 1000
    client_ms = sum(r[1] for r in results) * 1000
    latencies = sorted(x for r in results for x in r[3])
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
    failed = sum(r[4] for r in results)
    return Sample(ops / load.seconds, server_ms / ops, client_ms / ops, p99, failed, rss / 1e6)


def _spawn(_: int) -> None:
    time.sleep(0.5)  # each busy task makes the pool start one more worker process


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


SERVER_NAMES = ["reference", "reference-uvloop", "ours-same-stack", "ours-threaded", "ours"]


def servers(ref_python: Path) -> list[Server]:
    ours = Path(sys.executable)
    return [
        Server("reference", ref_python, REFERENCE, stateful_http=False),
        Server(
            "reference-uvloop", ref_python, REFERENCE, stateful_http=False, loop="uvloop", http="httptools"
        ),
        Server("ours-same-stack", ours, OURS, stateful_http=True),
        Server("ours-threaded", ours, OURS, stateful_http=True, threaded=True),
        Server("ours", ours, OURS, stateful_http=True, loop="uvloop", http="httptools"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="measured seconds per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each window")
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--client-procs", type=int, default=2, help="load-generator processes sharing them")
    parser.add_argument("--transports", default="ws,http")
    parser.add_argument(
        "--servers",
        default=",".join(SERVER_NAMES),
        help=f"which rows to run (reference always included): {','.join(SERVER_NAMES)}",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    transports = args.transports.split(",")
    loads = [Load(t, n, args.client_procs, args.seconds, args.warmup) for t in transports for n in counts]
    names = [n for n in SERVER_NAMES if n == "reference" or n in args.servers.split(",")]
    samples = run_all(loads, args.rounds, log=sys.stderr if args.json else sys.stdout, names=names)
    rows = result_rows(samples, loads, names)
    context = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 1),
        "seconds": args.seconds,
        "rounds": args.rounds,
        "client_procs": args.client_procs,
        "reference": f"openenv=={REF_VERSION}",
    }
    if args.json:
        print(json.dumps({"benchmark": "env_server", **context, "rows": rows}, indent=2))
    else:
        print_table(rows, context)


def run_all(
    loads: list[Load], rounds: int, log: TextIO, names: list[str] | None = None
) -> dict[tuple[str, Load], list[Sample]]:
    """Every server (of `names`, default all) under every load, `rounds` times; samples per (server, load)."""
    chosen = [s for s in servers(ensure_reference_venv()) if names is None or s.name in names]
    running = [(server, *server.start()) for server in chosen]
    procs = max(load.procs for load in loads)
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(procs, mp_context=context, initializer=os.setsid)  # own autogroups
    list(pool.map(_spawn, range(procs)))  # start the load generators before any window
    samples: dict[tuple[str, Load], list[Sample]] = {}
    try:
        for load in loads:
            # Every server once per round, back to back (in a rotating order), so background load on
            # this shared machine hits all alike; ratios are taken within a round.
            for r in range(rounds):
                for server, proc, url in running[r % len(running) :] + running[: r % len(running)]:
                    sample = measure(pool, load, server, url, proc.pid)
                    samples.setdefault((server.name, load), []).append(sample)
            for server, *_ in running:
                m = _median(samples[(server.name, load)])
                print(
                    f"  {server.name:16} {load.transport:4} x{load.clients:<3} {m.ops_per_s:9.0f} ops/s "
                    f"server {m.server_cpu_ms:6.3f} client {m.client_cpu_ms:6.3f} CPU-ms/op "
                    f"p99 {m.p99_ms:7.1f} ms rss {m.server_rss_mb:5.0f} MB failed {sum(s.failed for s in samples[(server.name, load)])}",
                    file=log,
                    flush=True,
                )
    finally:
        pool.shutdown(cancel_futures=True)
        for _, proc, _ in running:
            proc.terminate()
            proc.wait(10)
    return samples


def _median(values: list[Sample]) -> Sample:
    return Sample(*(statistics.median(getattr(v, f) for v in values) for f in Sample.__dataclass_fields__))


def result_rows(
    samples: dict[tuple[str, Load], list[Sample]], loads: list[Load], names: list[str] | None = None
) -> list[dict[str, Any]]:
    """One row per (load, server): medians, and the median of the per-round ratios to the reference.

    `failed` is the sum over rounds (any failed request matters), the rest are medians.
    """
    rows = []
    for load in loads:
        ref = samples[("reference", load)]
        for name in names or SERVER_NAMES:
            ours = samples[(name, load)]
            m = _median(ours)
            ops_ratio = statistics.median(o.ops_per_s / r.ops_per_s for o, r in zip(ours, ref, strict=True))
            cpu_ratio = statistics.median(
                o.server_cpu_ms / r.server_cpu_ms for o, r in zip(ours, ref, strict=True)
            )
            rows.append(
                {
                    "transport": load.transport,
                    "clients": load.clients,
                    "server": name,
                    **{k: round(v, 4) for k, v in asdict(m).items()},
                    "ops_vs_reference": round(ops_ratio, 3),
                    "server_cpu_vs_reference": round(cpu_ratio, 3),
                    "client_cores": round(m.client_cpu_ms * m.ops_per_s / 1000, 3),
                    "failed": sum(s.failed for s in ours),
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]], context: dict[str, Any]) -> None:
    print(
        "\n| transport | clients | server | ops/s | vs reference | server CPU-ms/op | vs reference "
        "| client CPU-ms/op | client cores | p99 ms | server RSS MB | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['transport']} | {r['clients']} | {r['server']} | {r['ops_per_s']:,.0f} "
            f"| {r['ops_vs_reference']:.2f}x | {r['server_cpu_ms']:.3f} | {r['server_cpu_vs_reference']:.2f}x "
            f"| {r['client_cpu_ms']:.3f} | {r['client_cores']:.2f} | {r['p99_ms']:.1f} "
            f"| {r['server_rss_mb']:.0f} | {r['failed']} |"
        )
    print(
        f"\n(python {context['python']}, {context['cpus']} CPUs, load average {context['load_average']}, "
        f"{context['client_procs']} client process(es), median of {context['rounds']} rounds of "
        f"{context['seconds']:g} s; ops = step round trips after one reset; ratios are per-round ratios to "
        "the reference in this run (median); client cores = the load generator's CPU use: near "
        "client_procs means the client, not the server, set the pace)"
    )


if __name__ == "__main__":
    main()
