"""Capture-proxy benchmark: latency added over direct vLLM, and turn throughput at growing lengths.

    .venv/bin/python bench/bench_proxy.py [--vllm-url URL] [--requests 24] [--sessions 32]
                                          [--turns 1,10,30] [--distinct] [--skip-latency] [--skip-throughput]

(1) Latency: the same chat request (greedy, fixed max_tokens) sent alternately straight to vLLM's
    `/v1/chat/completions` and through the proxy (which renders, splices and calls vLLM's
    `/v1/completions` by token ids); medians and their ratio. A vLLM server is started unless
    `--vllm-url` is given. When `.cache/bench/ref-venv` holds `openenv==0.10.0`, its capture server
    is measured on the same requests in the same run.
(2) Throughput: the proxy as a subprocess over an instant in-process token engine (`InstantBackend`,
    used only here), 32 concurrent sessions each playing a tool-loop conversation of 1, 10 or 30
    turns (~650-token tool results, ~20k tokens at 30 turns). Turns/s is wall-clock; CPU-ms per turn
    is the server process's user+system time, and "turns/s per core" = 1000 / CPU-ms, the rate one
    dedicated core sustains (the wall rate also pays for the load client and for whatever else the
    machine runs). By default the 32 sessions play the same conversation (like a GRPO group), so the
    renderer's shared suffix cache tokenizes each tool result once; `--distinct` gives every session
    its own tool outputs and measures the cost without that help. RSS is the server's at the end. The baseline row is the 1-turn run: flat cost
    means the ratios stay near 1.

Nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
REF_VENV = REPO / ".cache" / "bench" / "ref-venv"
sys.path.insert(0, str(REPO))

TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i}", "description": "Run a shell command in the workspace and return its output. " * 4,
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                   "required": ["command"]}}} for i in range(8)]
SYSTEM = "You are a coding agent working in a repository. Use the tools to inspect and edit files. " * 20
CALL = '<tool_call>\n{"name": "tool_0", "arguments": {"command": "cat module.py"}}\n</tool_call>'


# ---- the instant engine ------------------------------------------------------------------------------


class InstantBackend:
    """Answers every prompt at once with the same tool call; the bench measures only the proxy."""

    name = "instant"
    context_window = 1 << 20

    def __init__(self, completion_ids: list[int]) -> None:
        self.ids = completion_ids
        self.logprobs = [-0.25] * len(completion_ids)

    async def generate(self, prompt_ids: list[int], params: Any) -> Any:
        from openenv.capture.backends.base import Generation

        return Generation(list(self.ids), list(self.logprobs), "stop")

    async def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        return [-0.25] * len(completion_ids)

    async def aclose(self) -> None:
        return None


def serve_instant(port: int) -> None:
    """The throughput server: our app over `InstantBackend`, uvicorn as `openenv proxy` runs it."""
    import uvicorn

    from openenv.capture.app import create_app
    from openenv.capture.renderer import Renderer
    from openenv.capture.sessions import SessionManager
    from openenv.testing.tiny_model import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path(build=False))
    ids = renderer.encode(CALL) + [renderer.tokenizer.eos_token_id]
    manager = SessionManager(renderer=renderer, backend=InstantBackend(ids))
    uvicorn.run(create_app(manager, freeze_gc=True), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ---- conversations -----------------------------------------------------------------------------------


def tool_outputs(n: int, chars: int = 1900) -> list[str]:
    """Real-looking tool output: consecutive slices of stdlib sources (deterministic)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    text = "".join(p.read_text(errors="replace") for p in sorted(stdlib.glob("a*.py"))[:6])
    return [text[i * chars:(i + 1) * chars] for i in range(n)]


def conversation_bodies(turns: int, tag: str = "") -> list[bytes]:
    """Request k of a tool loop: system, task, then k (assistant tool call, tool result) pairs. A
    `tag` starts every tool result, so that tagged conversations share no tool output."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": "Fix the failing test in module.py."}]
    bodies = []
    for k, output in enumerate(tag + out for out in tool_outputs(turns)):
        bodies.append(json.dumps({"model": "tiny", "messages": messages, "tools": TOOLS}).encode())
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "tool_0", "arguments": '{"command": "cat module.py"}'}}
        messages = messages + [{"role": "assistant", "content": None, "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": f"call_{k}", "content": output}]
    return bodies


# ---- (2) throughput ------------------------------------------------------------------------------------


async def _play(session: Any, base: str, bodies: list[bytes], check: bool) -> None:
    token = None
    async with session.post(f"{base}/sessions") as r:
        token = (await r.json())["token"]
    url = f"{base}/s/{token}/v1/chat/completions"
    headers = {"content-type": "application/json"}
    for body in bodies:
        async with session.post(url, data=body, headers=headers) as r:
            await r.read()
            if r.status != 200:
                raise RuntimeError(f"proxy answered {r.status}: {await r.text()}")
    if check:  # warm-up only: the measured rounds carry no admin reads
        async with session.get(f"{base}/sessions/{token}/sequences") as r:
            stats = (await r.json())["stats"]
        if stats["sequences"] != 1 or stats["merge_ratio"] != 1.0:
            raise RuntimeError(f"conversation did not merge: {stats}")
    async with session.delete(f"{base}/sessions/{token}") as r:
        await r.read()


async def _throughput_round(base: str, plays: list[list[bytes]], check: bool = False) -> None:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=len(plays) * 2)
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(*(_play(http, base, bodies, check) for bodies in plays))


def throughput(turns: int, sessions: int, min_turns: int = 960, distinct: bool = False) -> dict[str, float]:
    """One row. With `distinct`, every conversation (every session of every round) has its own tool
    outputs, so no cache shared across sessions can help (the default: 32 identical rollouts, as a
    GRPO group that sends the same tool results)."""
    from openenv.testing.vllm_server import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve-instant", str(port)], cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(f"{base}/docs", server)
        bodies = conversation_bodies(turns)
        asyncio.run(_throughput_round(base, [bodies] * 4, check=True))  # warm-up: imports, caches, first renders
        proc = psutil.Process(server.pid)
        rounds = max(1, math.ceil(min_turns / (sessions * turns)))
        plays = [[conversation_bodies(turns, f"[{r}.{i}]\n") if distinct else bodies for i in range(sessions)]
                 for r in range(rounds)]
        cpu0, t0 = _cpu(proc), time.perf_counter()
        for round_plays in plays:
            asyncio.run(_throughput_round(base, round_plays))
        wall, cpu = time.perf_counter() - t0, _cpu(proc) - cpu0
        done = rounds * sessions * turns
        tokens = len(json.loads(bodies[-1])["messages"])
        return {"turns": turns, "turns_per_s": done / wall, "cpu_ms": 1000 * cpu / done,
                "rss_mb": proc.memory_info().rss / 2**20, "done": done, "messages": tokens}
    finally:
        server.terminate()
        server.wait(20)


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} not up after {timeout}s")


def prompt_tokens_at(turns: int) -> int:
    """Prompt length of the last request of a `turns`-turn conversation, in tiny-model tokens."""
    from openenv.capture.dialects.openai_chat import convert
    from openenv.capture.renderer import Renderer
    from openenv.testing.tiny_model import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path(build=False))
    req = convert.to_canonical(convert.parse(conversation_bodies(turns)[-1], None))  # type: ignore[arg-type]
    return len(renderer.full_prompt(req.messages, req.tools)[1])


# ---- (1) latency ----------------------------------------------------------------------------------------


def latency(vllm_url: str, requests: int, max_tokens: int) -> list[dict[str, Any]]:
    """Median latency straight to vLLM, through our proxy and (if installed) through the reference."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the failing test."}]
    body = {"model": "tiny", "messages": messages, "tools": TOOLS, "temperature": 0.0,
            "max_tokens": max_tokens}
    targets: dict[str, tuple[str, dict[str, str]]] = {"vllm direct": (f"{vllm_url}/v1/chat/completions", {})}
    ours, ours_url = _start_ours(vllm_url)  # a subprocess, like vLLM and the reference: no shared GIL
    reference = _start_reference(vllm_url)
    try:
        targets["openenv proxy"] = (ours_url, {})
        if reference is not None:
            targets[f"reference {REF_VERSION}"] = reference[1]
        times: dict[str, list[float]] = {name: [] for name in targets}
        with httpx.Client(timeout=120) as client:
            for i in range(requests + 2):
                for name, (url, headers) in (targets.items() if i % 2 == 0 else reversed(targets.items())):
                    t0 = time.perf_counter()
                    r = client.post(url, json=body, headers=headers)
                    r.raise_for_status()
                    if i >= 2:  # two warm-up rounds
                        times[name].append(time.perf_counter() - t0)
    finally:
        ours.terminate()
        ours.wait(20)
        if reference is not None:
            reference[0].terminate()
            reference[0].wait(20)
    base = statistics.median(times["vllm direct"])
    return [{"target": name, "median_ms": 1000 * statistics.median(t), "p90_ms": 1000 * _p90(t),
             "ratio": statistics.median(t) / base} for name, t in times.items()]


def _start_ours(vllm_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`openenv proxy` in front of vLLM, with one auto session named `bench`."""
    from openenv.testing.tiny_model import tiny_model_path
    from openenv.testing.vllm_server import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "openenv.cli.main", "proxy", "--backend", "vllm", "--upstream",
                             vllm_url, "--model", str(tiny_model_path(build=False)), "--port", str(port),
                             "--session-token", "bench"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    _wait_healthy(f"{base}/s/bench/v1/models", proc)
    return proc, f"{base}/s/bench/v1/chat/completions"


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


REF_VERSION = "0.10.0"


def _start_reference(vllm_url: str) -> tuple[subprocess.Popen[bytes], tuple[str, dict[str, str]]] | None:
    """The reference capture server from its own venv, with one session; None when not installed."""
    python = REF_VENV / "bin" / "python"
    if not python.exists():
        return None
    from openenv.testing.vllm_server import free_port

    port = free_port()
    proc = subprocess.Popen([str(python), "-m", "openenv.core.harness.capture.server", "--llm-url", vllm_url,
                             "--model", "tiny", "--host", "127.0.0.1", "--port", str(port)],
                            cwd="/tmp", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(f"{base}/health", proc, timeout=240)
        token = _reference_session(base)
    except (RuntimeError, TimeoutError, httpx.HTTPError, KeyError) as exc:
        print(f"(reference server not measured: {exc})", file=sys.stderr)
        proc.terminate()
        return None
    return proc, (f"{base}/v1/chat/completions", {"authorization": f"Bearer {token}"})  # key = session id


def _reference_session(base: str) -> str:
    r = httpx.post(f"{base}/sessions", json={}, timeout=10)
    r.raise_for_status()
    return str(r.json()["session_id"])


# ---- main -----------------------------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    head = " | ".join(f"{title:>{len(title) if i else 18}}" for i, (_, title, _) in enumerate(columns))
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = [format(row[key], fmt) for key, _, fmt in columns]
        lines.append(" | ".join(f"{c:>{len(t) if i else 18}}" for i, (c, (_, t, _)) in enumerate(zip(cells, columns))))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-instant", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--vllm-url")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", default="1,10,30")
    parser.add_argument("--distinct", action="store_true", help="no tool output shared between sessions")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    if args.serve_instant:
        serve_instant(args.serve_instant)
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not args.skip_throughput:
        rows = [throughput(int(t), args.sessions, distinct=args.distinct) for t in args.turns.split(",")]
        base = rows[0]
        for row in rows:
            row["tokens"] = prompt_tokens_at(int(row["turns"]))
            row["cpu_ratio"] = row["cpu_ms"] / base["cpu_ms"]
            row["rate_ratio"] = row["turns_per_s"] / base["turns_per_s"]
            row["per_core"] = 1000 / row["cpu_ms"]
        shared = "distinct tool outputs per session" if args.distinct else "identical conversations"
        print(f"\nthroughput: {args.sessions} concurrent sessions ({shared}), instant engine, "
              "baseline = the 1-turn row")
        print(_table(rows, [("turns", "turns/conversation", "d"), ("tokens", "last prompt tokens", "d"),
                            ("turns_per_s", "turns/s", ".0f"), ("rate_ratio", "vs base", ".2f"),
                            ("cpu_ms", "CPU-ms/turn", ".2f"), ("cpu_ratio", "vs base", ".2f"),
                            ("per_core", "turns/s per core", ".0f"),
                            ("rss_mb", "RSS MB", ".0f")]))
    if not args.skip_latency:
        server = None
        url = args.vllm_url
        if url is None:
            from openenv.testing.tiny_model import tiny_model_path
            from openenv.testing.vllm_server import VLLMServer

            server = VLLMServer(tiny_model_path(build=False)).start()
            url = server.base_url
        try:
            rows = latency(url.rstrip("/"), args.requests, args.max_tokens)
        finally:
            if server is not None:
                server.stop()
        print(f"\nlatency: {args.requests} chat requests each, greedy, max_tokens={args.max_tokens}, "
              "baseline = vLLM direct")
        print(_table(rows, [("target", "target", "s"), ("median_ms", "median ms", ".1f"),
                            ("p90_ms", "p90 ms", ".1f"), ("ratio", "vs vLLM", ".3f")]))


if __name__ == "__main__":
    main()
