"""Capture-proxy benchmark: latency added over direct vLLM, and turn throughput at growing lengths.

    .venv/bin/python bench/bench_proxy.py [--vllm-url URL] [--requests 24] [--sessions 32]
                                          [--turns 1,10,30] [--distinct] [--targets ours-inproc,ours,reference]
                                          [--tool-chars 1900] [--skip-latency] [--skip-throughput] [--json PATH]

(1) Latency: the same chat request (greedy, fixed max_tokens), non-streamed and streamed, sent in
    alternating order straight to vLLM's `/v1/chat/completions`, through the proxy (which renders,
    splices and calls vLLM's `/v1/completions` by token ids) and, when `.cache/reference-venv` holds
    `openenv==0.10.0`, through the reference capture server; medians, p90s, ratios to vLLM direct and
    the proxies' CPU-ms per request. A vLLM server is started unless `--vllm-url` is given.
(2) Throughput: concurrent sessions each playing a tool-loop conversation of 1, 10 or 30 turns
    (`--tool-chars` per tool result; 1900 is ~650 tokens, ~20k tokens at 30 turns) through each of
    `--targets`: `ours-inproc` is our proxy over an in-process instant engine (`InstantBackend`, used
    only here; the default); `ours` is `openenv proxy --backend vllm` and `reference` the reference
    server, both over the instant HTTP engine in bench/engines.py. Turns/s is wall-clock; CPU-ms per
    turn is the proxy process's user+system time over the conversations (sessions are opened and
    closed outside that span), and "turns/s per core" = 1000 / CPU-ms, the rate one dedicated core
    sustains (the wall rate also pays for the load client, the engine and whatever else the machine
    runs). Every turn brings one new block of text (the task's test report, then one file's text per
    tool result), so a flat cost is one that does not grow with the conversation. By default the
    sessions play the same conversation (like a GRPO group), so the renderer's shared suffix cache
    tokenizes each block once; `--distinct` gives every conversation text no other conversation of the
    run has sent (fresh slices of the stdlib's sources) and measures the cost without that help. RSS
    is the server's at the end. The baseline row is each target's 1-turn run: flat cost means the
    ratios stay near 1.

Nothing here is asserted in tests. bench/report.py runs both side by side with the other benchmarks.
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
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import servers
from conversations import SYSTEM, TOOLS, conversation_bodies, fresh, restart_fresh
from servers import REF_PYTHON, REF_VENV, REF_VERSION
from targets import TARGETS, Target

__all__ = [
    "REF_PYTHON",
    "REF_VENV",
    "REF_VERSION",
    "Target",
    "TARGETS",
    "latency",
    "start_engine",
    "throughput",
    "throughput_table",
]

# ---- (2) throughput ------------------------------------------------------------------------------------


def start_engine() -> servers.Spawned:
    """The instant HTTP engine (bench/engines.py) both HTTP targets call."""
    return servers.engine("instant")


async def _play(http: Any, url: str, headers: dict[str, str], bodies: list[bytes]) -> None:
    for body in bodies:
        async with http.post(url, data=body, headers={"content-type": "application/json", **headers}) as r:
            await r.read()
            if r.status != 200:
                raise RuntimeError(f"proxy answered {r.status}: {await r.text()}")


async def _round(
    target: Target, plays: list[list[bytes]], check: bool = False, engine: psutil.Process | None = None
) -> tuple[float, float]:
    """Open a session per conversation, play them all concurrently, close them. Returns the proxy's
    and the engine's CPU seconds spent on the conversations only (session admin is outside the span)."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=len(plays) * 2)) as http:
        sessions = [await target.open(http) for _ in plays]
        assert target.proc is not None
        proc = psutil.Process(target.proc.pid)
        cpu0, engine0 = _cpu(proc), _cpu(engine) if engine else 0.0
        await asyncio.gather(
            *(_play(http, url, headers, bodies) for (url, headers, _), bodies in zip(sessions, plays))
        )
        cpu, engine_cpu = _cpu(proc) - cpu0, (_cpu(engine) - engine0 if engine else 0.0)
        for _, _, token in sessions:
            if check and not await target.merged(http, token):
                raise RuntimeError(f"{target.name}: a conversation did not merge into one sequence")
            await target.close(http, token)
    return cpu, engine_cpu


def throughput(
    target: Target,
    turns: int,
    sessions: int,
    *,
    min_turns: int = 960,
    distinct: bool = False,
    tool_chars: int = 1900,
    max_seconds: float = 20.0,
    engine_pid: int | None = None,
) -> dict[str, Any]:
    """One row: `sessions` concurrent conversations of `turns` turns, repeated until `min_turns` turns
    were played or `max_seconds` passed (at least one round). With `distinct`, every conversation has
    its own tool outputs, so no cache shared across sessions can help (the default: identical
    rollouts, as a GRPO group that sends the same tool results). With `engine_pid`, the instant engine's
    CPU per turn too (see `InstantEngine.front_end`)."""
    bodies = conversation_bodies(turns, chars=tool_chars)
    asyncio.run(_round(target, [bodies] * 4, check=True))  # warm-up: imports, caches, first renders
    assert target.proc is not None
    proc = psutil.Process(target.proc.pid)
    rounds = max(1, math.ceil(min_turns / (sessions * turns)))
    engine = psutil.Process(engine_pid) if engine_pid and target.calls_engine else None
    wall = cpu = engine_cpu = 0.0
    done = 0
    for r in range(rounds):
        plays = [
            conversation_bodies(turns, f"[{r}.{i}]\n", tool_chars, fresh(turns)) if distinct else bodies
            for i in range(sessions)
        ]
        t0 = time.perf_counter()
        proxy_s, engine_s = asyncio.run(_round(target, plays, engine=engine))
        cpu, engine_cpu = cpu + proxy_s, engine_cpu + engine_s
        wall += time.perf_counter() - t0
        done += sessions * turns
        if wall > max_seconds:
            break
    return {
        "target": target.name,
        "turns": turns,
        "turns_per_s": done / wall,
        "cpu_ms": 1000 * cpu / done,
        "engine_cpu_ms": 1000 * engine_cpu / done if engine else None,  # None: no engine process measured
        "rss_mb": proc.memory_info().rss / 2**20,
        "done": done,
        "distinct": distinct,
    }


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def prompt_tokens_at(turns: int, tool_chars: int = 1900) -> int:
    """Prompt length of the last request of a `turns`-turn conversation, in tiny-model tokens."""
    from openenv.capture.dialects.openai_chat import convert
    from openenv.capture.dialects.state import DialectState
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    last = conversation_bodies(turns, chars=tool_chars)[-1]
    state = DialectState()
    req = convert.to_canonical(convert.parse(last, None, state), state)  # type: ignore[arg-type]
    return len(renderer.full_prompt(req.messages, req.tools)[1])


def throughput_table(
    targets: list[str],
    turn_counts: list[int],
    sessions: int,
    *,
    distinct: tuple[bool, ...] = (False,),
    tool_chars: int = 1900,
    min_turns: int = 960,
    max_seconds: float = 20.0,
    on_row: Any = None,
) -> list[dict[str, Any]]:
    """Every target at every conversation length (and sharing mode); ratios vs the target's own 1-turn
    row and vs the reference in the same mode and length. Starts the instant engine and each proxy once."""
    engine = start_engine() if set(targets) - {"ours-inproc"} else None
    engine_url = engine.base if engine is not None else None
    rows: list[dict[str, Any]] = []
    try:
        for key in targets:
            restart_fresh()
            target = TARGETS[key](engine_url).start()
            try:
                for mode in distinct:
                    for turns in turn_counts:
                        try:
                            row = throughput(
                                target,
                                turns,
                                sessions,
                                distinct=mode,
                                tool_chars=tool_chars,
                                min_turns=min_turns,
                                max_seconds=max_seconds,
                                engine_pid=engine.pid if engine else None,
                            )
                        except Exception as exc:
                            row = {
                                "target": target.name,
                                "turns": turns,
                                "distinct": mode,
                                "error": f"{type(exc).__name__}: {exc}"[:200],
                            }
                        rows.append(row)
                        if on_row is not None:
                            on_row(row)
            finally:
                target.stop()
    finally:
        if engine is not None:
            engine.stop()
    tokens = {t: prompt_tokens_at(t, tool_chars) for t in turn_counts}
    for row in rows:
        if "error" in row:
            continue
        same = [r for r in rows if r["distinct"] == row["distinct"] and "error" not in r]
        base = next(r for r in same if r["target"] == row["target"])
        ref = next(
            (r for r in same if r["target"].startswith("reference") and r["turns"] == row["turns"]), None
        )
        engines = None if ref is None else (ref["engine_cpu_ms"], row["engine_cpu_ms"])
        row.update(
            tokens=tokens[row["turns"]],
            cpu_ratio=row["cpu_ms"] / base["cpu_ms"],
            per_core=1000 / row["cpu_ms"],
            rate_vs_ref=row["turns_per_s"] / ref["turns_per_s"] if ref else None,
            cpu_vs_ref=ref["cpu_ms"] / row["cpu_ms"] if ref else None,
            system_vs_ref=(ref["cpu_ms"] + engines[0]) / (row["cpu_ms"] + engines[1])
            if engines is not None and None not in engines
            else None,
        )
    return rows


# ---- (1) latency ----------------------------------------------------------------------------------------


DIRECT = "vllm direct"
# What any capture must ask the engine for: the sampled ids and their logprobs (the reference adds exactly
# these two fields to the chat request it forwards; ours asks /v1/completions for the same by token ids).
DIRECT_CAPTURING = "vllm direct + logprobs, ids"


def latency(
    vllm_url: str,
    requests: int,
    max_tokens: int,
    *,
    streams: tuple[bool, ...] = (False, True),
    on_progress: Any = None,
) -> list[dict[str, Any]]:
    """Latency straight to vLLM (plain, and asking for the logprobs and token ids a capture needs),
    through our proxy and (if installed) through the reference, on the same chat request, non-streamed
    and streamed (to the last byte). Targets alternate order every round (ABCD DCBA ...) so drift and
    background load hit all alike. Proxy CPU-ms per request is the proxy process's own user+system time,
    which a loaded machine does not inflate."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the failing test."}]
    body = {
        "model": "tiny",
        "messages": messages,
        "tools": TOOLS,
        "temperature": 0.0,
        "max_tokens": max_tokens,
    }
    chat = f"{vllm_url}/v1/chat/completions"
    targets: dict[str, tuple[str, dict[str, str], subprocess.Popen[bytes] | None, dict[str, Any]]] = {
        DIRECT: (chat, {}, None, {}),
        DIRECT_CAPTURING: (chat, {}, None, {"logprobs": True, "return_token_ids": True}),
    }
    ours, ours_url = _start_ours(vllm_url)  # a subprocess, like vLLM and the reference: no shared GIL
    reference = _start_reference(vllm_url)
    targets["openenv proxy"] = (ours_url, {}, ours, {})
    if reference is not None:
        targets[f"reference {REF_VERSION}"] = (*reference[1], reference[0], {})
    times: dict[tuple[str, bool], list[float]] = {(name, st): [] for name in targets for st in streams}
    cpu: dict[tuple[str, bool], float] = dict.fromkeys(times, 0.0)
    try:
        with httpx.Client(timeout=120) as client:
            for i in range(requests + 2):
                order = list(targets.items()) if i % 2 == 0 else list(reversed(targets.items()))
                for stream in streams:
                    for name, (url, headers, proc, extra) in order:
                        c0 = _cpu(psutil.Process(proc.pid)) if proc is not None else 0.0
                        elapsed = _one_request(client, url, headers, {**body, **extra, "stream": stream})
                        if i >= 2:  # two warm-up rounds
                            times[(name, stream)].append(elapsed)
                            if proc is not None:
                                cpu[(name, stream)] += _cpu(psutil.Process(proc.pid)) - c0
                if on_progress is not None:
                    on_progress(i + 1, requests + 2)
    finally:
        for _, _, proc, _ in targets.values():
            if proc is not None:
                proc.terminate()
                proc.wait(20)
    rows = []
    for (name, stream), t in times.items():
        base = statistics.median(times[(DIRECT, stream)])
        capturing = statistics.median(times[(DIRECT_CAPTURING, stream)])
        rows.append(
            {
                "target": name,
                "stream": stream,
                "n": len(t),
                "median_ms": 1000 * statistics.median(t),
                "p90_ms": 1000 * _p90(t),
                "ratio": statistics.median(t) / base,
                "ratio_capturing": statistics.median(t) / capturing,
                "added_ms": 1000 * (statistics.median(t) - base),
                "proxy_cpu_ms": 1000 * cpu[(name, stream)] / len(t) if targets[name][2] is not None else None,
            }
        )
    return rows


def _one_request(client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]) -> float:
    """Seconds until the whole reply (every SSE event, for a stream) has arrived."""
    t0 = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as r:
        r.raise_for_status()
        for _ in r.iter_raw():
            pass
    return time.perf_counter() - t0


def _start_ours(vllm_url: str) -> tuple[subprocess.Popen[bytes], str]:
    """`openenv proxy` in front of vLLM, with one auto session named `bench`."""
    ours = servers.ours(vllm_url, session_token="bench")
    return ours.proc, f"{ours.base}/s/bench/v1/chat/completions"


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def _start_reference(vllm_url: str) -> tuple[subprocess.Popen[bytes], tuple[str, dict[str, str]]] | None:
    """The reference capture server from its own venv, with one session; None when not installed."""
    if not REF_PYTHON.exists():
        return None
    from openenv.errors import TransportError

    try:
        ref = servers.reference(vllm_url, timeout=240)
    except TransportError as exc:
        print(f"(reference server not measured: {exc})", file=sys.stderr)
        return None
    try:
        token = _reference_session(ref.base)
    except (httpx.HTTPError, KeyError) as exc:
        print(f"(reference server not measured: {exc})", file=sys.stderr)
        ref.stop()
        return None
    return ref.proc, (
        f"{ref.base}/v1/chat/completions",
        {"authorization": f"Bearer {token}"},
    )  # key = session id


def _reference_session(base: str) -> str:
    r = httpx.post(f"{base}/sessions", json={}, timeout=10)
    r.raise_for_status()
    return str(r.json()["session_id"])


# ---- main -----------------------------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    head = " | ".join(f"{title:>{len(title) if i else 18}}" for i, (_, title, _) in enumerate(columns))
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = ["-" if row[key] is None else format(row[key], fmt) for key, _, fmt in columns]
        lines.append(
            " | ".join(f"{c:>{len(t) if i else 18}}" for i, (c, (_, t, _)) in enumerate(zip(cells, columns)))
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-url")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", default="1,10,30")
    parser.add_argument("--distinct", action="store_true", help="no tool output shared between sessions")
    parser.add_argument("--targets", default="ours-inproc", help=f"comma list of {', '.join(TARGETS)}")
    parser.add_argument("--tool-chars", type=int, default=1900, help="characters per tool result")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out: dict[str, Any] = {}
    if not args.skip_throughput:
        rows = out["throughput"] = throughput_table(
            args.targets.split(","),
            [int(t) for t in args.turns.split(",")],
            args.sessions,
            distinct=(args.distinct,),
            tool_chars=args.tool_chars,
        )
        shared = "distinct tool outputs per session" if args.distinct else "identical conversations"
        print(
            f"\nthroughput: {args.sessions} concurrent sessions ({shared}), instant engine, "
            "vs base = the target's 1-turn row"
        )
        print(
            _table(
                rows,
                [
                    ("target", "target", "s"),
                    ("turns", "turns", "d"),
                    ("tokens", "last prompt tokens", "d"),
                    ("turns_per_s", "turns/s", ".0f"),
                    ("cpu_ms", "CPU-ms/turn", ".2f"),
                    ("cpu_ratio", "vs base", ".2f"),
                    ("per_core", "turns/s per core", ".0f"),
                    ("engine_cpu_ms", "engine CPU-ms/turn", ".2f"),
                    ("rss_mb", "RSS MB", ".0f"),
                ],
            )
        )
    if not args.skip_latency:
        server = None
        url = args.vllm_url
        if url is None:
            from openenv.models import tiny_model_path
            from openenv.soak.vllm_server import VLLMServer

            server = VLLMServer(tiny_model_path()).start()
            url = server.base_url
        try:
            rows = out["latency"] = latency(url.rstrip("/"), args.requests, args.max_tokens)
        finally:
            if server is not None:
                server.stop()
        print(
            f"\nlatency: {args.requests} chat requests each, greedy, max_tokens={args.max_tokens}, "
            "baseline = vLLM direct"
        )
        print(
            _table(
                rows,
                [
                    ("target", "target", "s"),
                    ("stream", "stream", "d"),
                    ("median_ms", "median ms", ".1f"),
                    ("p90_ms", "p90 ms", ".1f"),
                    ("ratio", "vs vLLM", ".3f"),
                    ("ratio_capturing", "vs vLLM + logprobs", ".3f"),
                ],
            )
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
