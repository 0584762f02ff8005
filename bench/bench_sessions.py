"""One proxy process under many concurrent agent sessions, in front of a stand-in engine at realistic speed.

    .venv/bin/python bench/bench_sessions.py [--levels 1,10,100,1000] [--turns 8] [--tool-chars 11400]
                                             [--targets ours,reference] [--dialects] [--prefill-tps 20000]
                                             [--decode-tps 100] [--json PATH]

For each target proxy (ours: `openenv proxy --backend vllm`; the reference's capture server from
`.cache/reference-venv`) and each concurrency level N, in one run:

- N sessions are opened, then play N distinct tool-loop conversations at once (`--turns` requests each,
  every tool result `--tool-chars` of fresh text, so the last prompt of the default is ~32k tiny-model
  tokens and no cache shared across sessions helps), through the proxy, to the paced engine of
  bench/engines.py (a slot per session: no engine queueing, so what grows with N is the proxy's);
- the same N x turns requests go straight to the same engine at the same concurrency, with the very
  token-id prompts the proxy sent (read back from each session's trajectory): **added latency** at p50/p99 is through-the-proxy minus direct, at each percentile;
- **proxy CPU per turn** is the proxy process's user+system time over the conversations / turns played;
- **memory per open session** is the proxy's RSS with the N played sessions still open, minus before
  they opened, / N (the recorded trajectories included: that is what an open session holds);
- after every session is closed: sessions still listed, open file descriptors and TCP connections of
  the proxy against their values before the level, and RSS against the value before the first level
  (after a warm-up), which must come back within 5%, and against its value before this level (a level
  repeated, `--levels 1000,1000`, ends where the one before ended unless something leaks). Both are read
  `SETTLE_S` after the last close: ours empties its caches and trims its heap once it has had no session
  for 5 s (`--release-idle`).

`--dialects` adds, for ours, a level of N sessions each replaying one recorded harness session of
bench/sessions/ (claude-code: Anthropic Messages, codex: Responses, gemini-cli: Gemini, pi: Chat), so
all four wire formats are under the same load.

Nothing here is asserted in tests (tests/bench/test_scripts_import.py checks that it imports).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import msgspec
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import servers
from conversations import conversation_bodies, fresh, restart_fresh
from targets import TARGETS, Target

__all__ = ["level", "main", "percentile", "run"]

SETTLE_S = 7.0  # after the last close: ours releases its caches and heap 5 s after its last session closed
HARNESS_DIALECTS = {"claude-code": "anthropic", "codex": "responses", "gemini-cli": "gemini", "pi": "chat"}


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` onto `cpus` (threads started later inherit it from theirs)."""
    import os

    for thread in psutil.Process(pid).threads():
        os.sched_setaffinity(thread.id, cpus)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _tcp(proc: psutil.Process) -> int:
    return sum(1 for c in proc.net_connections(kind="tcp") if c.status != psutil.CONN_LISTEN)


def recorded(harness: str) -> list[tuple[str, bytes]]:
    """A recorded harness session of bench/sessions/: (route with query, body) per request."""
    rows = [
        json.loads(line)
        for line in (REPO / "bench" / "sessions" / f"{harness}.jsonl").read_text().splitlines()
    ]
    return [
        (row["route"] + (f"?{row['query']}" if row.get("query") else ""), json.dumps(row["body"]).encode())
        for row in rows
    ]


def _server_ms(headers: Any) -> dict[str, float]:
    """Our proxy's `Server-Timing` (engine, policy, proxy ms), or the paced engine's `x-engine-ms` as
    `engine`; empty when the reply carries neither (the reference's proxy)."""
    if "server-timing" in headers:
        parts = (part.strip().split(";dur=") for part in headers["server-timing"].split(","))
        return {name: float(ms) for name, ms in parts}
    if "x-engine-ms" in headers:
        return {"engine": float(headers["x-engine-ms"])}
    return {}


async def _post(
    http: Any,
    url: str,
    body: bytes,
    headers: dict[str, str],
    times: list[float],
    split: list[dict[str, float]] | None = None,
) -> int:
    """POST and record the client-side milliseconds; with `split`, also what the server says it spent,
    with `client` = the client's milliseconds minus the engine's (and the policy's)."""
    t0 = time.perf_counter()
    async with http.post(url, data=body, headers={"content-type": "application/json", **headers}) as r:
        payload = await r.read()
        if r.status != 200:
            raise RuntimeError(f"{url} answered {r.status}: {payload[:300]!r}")
        server = _server_ms(r.headers)
    ms = 1000 * (time.perf_counter() - t0)
    times.append(ms)
    if split is not None and "engine" in server:
        split.append({**server, "beyond_engine": ms - server["engine"] - server.get("policy", 0.0)})
    return len(payload)


async def _sessions(target: Target, http: Any, n: int) -> list[tuple[str, dict[str, str], str]]:
    opened: list[tuple[str, dict[str, str], str]] = []
    for start in range(0, n, 100):  # open in batches: the admin route is not what is measured
        opened += await asyncio.gather(*(target.open(http) for _ in range(start, min(n, start + 100))))
    return opened


async def _prompts(target: Target, http: Any, token: str) -> list[tuple[array[int], int]]:
    """Every turn's prompt as our proxy sent it to the engine, read back from the session's trajectory:
    (its sequence's ids, the prompt's length), a turn's prompt being the first `prompt_len` ids of its
    sequence. The direct path replays these very ids, so the engine parses the same bodies both ways."""
    async with http.get(f"{target.base}/sessions/{token}/trajectory") as r:
        turns = (await r.json())["turns"]
    async with http.get(f"{target.base}/sessions/{token}/sequences") as r:
        rows = (await r.json())["sequences"]
    streams = [array("i", row["prompt_ids"] + row["completion_ids"]) for row in rows]
    return [(streams[t["sequence"]], int(t["prompt_len"])) for t in turns if not t.get("aux")]


async def _direct(
    engine_url: str,
    http: Any,
    prompts: list[list[tuple[array[int], int]]],
    think_s: float = 0.0,
    split: list[dict[str, float]] | None = None,
) -> list[float]:
    """The same requests straight to the engine: the token-id prompts the proxy sent, id for id."""
    times: list[float] = []

    async def play(session: list[tuple[array[int], int]], rng: random.Random) -> None:
        for stream, length in session:
            if think_s:
                await asyncio.sleep(rng.expovariate(1 / think_s))
            prompt = stream[:length].tolist() if stream else [7] * length
            # msgspec, as our proxy encodes its engine requests: json.dumps took ~4 ms of this client's
            # loop per 17k-token prompt, a lag every other session's clock then counted as the engine's
            body = msgspec.json.encode(
                {"model": "tiny", "prompt": prompt, "max_tokens": 64, "logprobs": 0, "return_token_ids": True}
            )
            await _post(http, f"{engine_url}/v1/completions", body, {}, times, split)

    await asyncio.gather(*(play(s, random.Random(i)) for i, s in enumerate(prompts)))
    return times


async def level(
    target: Target,
    engine_url: str,
    n: int,
    turns: int,
    tool_chars: int,
    *,
    dialects: bool = False,
    rss_start: float,
    think_s: float = 0.0,
) -> dict[str, Any]:
    """One row: N concurrent sessions through `target` (see the module docstring)."""
    import aiohttp

    assert target.proc is not None
    proc = psutil.Process(target.proc.pid)
    gc.collect()
    fds0, tcp0 = proc.num_fds(), _tcp(proc)
    # With think time a pooled connection idles for seconds, and a reused one raced the server's keep-alive
    # close (5 s) whenever this client's loop lagged by seconds (ServerDisconnectedError at 1,000 sessions
    # on a loaded machine): a connection per turn then, as a harness idle for longer than that gets.
    connector = (
        aiohttp.TCPConnector(limit=0, force_close=True)
        if think_s
        else aiohttp.TCPConnector(limit=0, keepalive_timeout=15.0)
    )
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=1800)) as http:
        rss0 = proc.memory_info().rss
        sessions = await _sessions(target, http, n)
        harnesses = list(HARNESS_DIALECTS)
        if dialects:
            plays = [
                [(route, body) for route, body in recorded(harnesses[i % len(harnesses)])] for i in range(n)
            ]
        else:
            plays = [
                [
                    ("/v1/chat/completions", b)
                    for b in conversation_bodies(turns, f"[{i}]\n", tool_chars, fresh(turns))
                ]
                for i in range(n)
            ]
        times: list[float] = []
        split: list[dict[str, float]] = []

        async def play(session: tuple[str, dict[str, str], str], requests: list[tuple[str, bytes]]) -> None:
            url, headers, _ = session
            base = url.rsplit("/v1/chat/completions", 1)[0]
            rng = random.Random(url)
            for route, body in requests:
                if think_s:  # the harness running its tools before the next turn (and the first)
                    await asyncio.sleep(rng.expovariate(1 / think_s))
                await _post(http, base + route, body, headers, times, split)

        cpu0, t0 = _cpu(proc), time.perf_counter()
        await asyncio.gather(*(play(s, p) for s, p in zip(sessions, plays)))
        wall, cpu = time.perf_counter() - t0, _cpu(proc) - cpu0
        rss_open = proc.memory_info().rss
        prompts: list[list[tuple[array[int], int]]] | None = None
        if target.name == "ours" and not dialects:
            prompts = []
            for start in range(0, n, 50):  # in batches: each read is a sequence's ids as JSON
                batch = sessions[start : start + 50]
                prompts += await asyncio.gather(*(_prompts(target, http, tok) for _, _, tok in batch))
        for start in range(0, n, 100):
            await asyncio.gather(*(target.close(http, tok) for _, _, tok in sessions[start : start + 100]))
        if prompts is None:  # the reference: nothing to replay
            prompts = [[(array("i"), 0)] * turns for _ in range(n)]
        direct_split: list[dict[str, float]] = []
        direct = (
            await _direct(engine_url, http, prompts, think_s, direct_split)
            if any(length for session in prompts for _, length in session)
            else []
        )
        listed = await _still_open(target, http, [tok for _, _, tok in sessions])
    # let the server drop closed keep-alive connections, and ours give back memory once idle (5 s)
    await asyncio.sleep(SETTLE_S)
    gc.collect()
    played = len(times)
    row: dict[str, Any] = {
        "target": target.name,
        "sessions": n,
        "turns": played,
        "dialects": dialects,
        "think_s": think_s,
        "wall_s": round(wall, 2),
        "turns_per_s": played / wall,
        "cpu_ms_per_turn": 1000 * cpu / played,
        "p50_ms": percentile(times, 50),
        "p99_ms": percentile(times, 99),
        "mem_kb_per_session": (rss_open - rss0) / 1024 / n,
        "left_sessions": listed,
        "left_fds": proc.num_fds() - fds0,
        "left_tcp": _tcp(proc) - tcp0,
        "rss_vs_start": proc.memory_info().rss / rss_start,
        # the same level again ends where the last one did if nothing leaks (no growth per round)
        "rss_vs_level_start": proc.memory_info().rss / rss0,
    }
    if split:  # per request, from the proxy's Server-Timing: no second distribution to subtract
        beyond = [s["beyond_engine"] for s in split]
        own = [s["proxy"] for s in split if "proxy" in s]
        row.update(beyond_engine_p50_ms=percentile(beyond, 50), beyond_engine_p99_ms=percentile(beyond, 99))
        if own:
            row.update(in_proxy_p50_ms=percentile(own, 50), in_proxy_p99_ms=percentile(own, 99))
        upload = [s["body"] for s in split if "body" in s]
        if upload:  # the handler's wait for the body (the client's upload and the loop's lag meanwhile)
            row.update(body_p50_ms=percentile(upload, 50), body_p99_ms=percentile(upload, 99))
    if direct_split:  # the same measure on the direct path: the client's and the network's own share
        beyond = [s["beyond_engine"] for s in direct_split]
        row.update(
            direct_beyond_engine_p50_ms=percentile(beyond, 50),
            direct_beyond_engine_p99_ms=percentile(beyond, 99),
        )
    if direct:
        row.update(
            direct_p50_ms=percentile(direct, 50),
            direct_p99_ms=percentile(direct, 99),
            added_p50_ms=row["p50_ms"] - percentile(direct, 50),
            added_p99_ms=row["p99_ms"] - percentile(direct, 99),
            last_prompt_tokens=max(length for session in prompts for _, length in session),
        )
    return row


async def _still_open(target: Target, http: Any, tokens: list[str]) -> int | None:
    """How many closed sessions ours still answers for (its trajectory route: 404 once closed); None
    for the reference, which has no such route to ask."""
    if target.name != "ours":
        return None

    async def alive(token: str) -> bool:
        async with http.get(f"{target.base}/sessions/{token}/trajectory") as r:
            await r.read()
            return r.status == 200

    found = 0
    for start in range(0, len(tokens), 100):
        found += sum(await asyncio.gather(*(alive(t) for t in tokens[start : start + 100])))
    return found


def run(
    targets: list[str],
    levels: list[int],
    turns: int,
    tool_chars: int,
    *,
    dialects: bool,
    prefill_tps: float,
    decode_tps: float,
    on_row: Any = print,
    pin_proxy: int | None = None,
    proxy_malloc: str | None = None,
    think_s: float = 0.0,
) -> list[dict[str, Any]]:
    """Every target at every level, one engine for all (slots = the largest level). With `pin_proxy`,
    the proxy runs alone on that CPU and this process (the load) and the engine on the others."""
    engine = servers.engine(
        "paced",
        "--prefill-tps",
        str(prefill_tps),
        "--decode-tps",
        str(decode_tps),
        "--concurrency",
        str(max(levels)),
    )
    rows: list[dict[str, Any]] = []
    others: set[int] = set()
    if pin_proxy is not None:
        import os

        others = set(os.sched_getaffinity(0)) - {pin_proxy}
        pin(os.getpid(), others)
        pin(engine.pid, others)
    try:
        for key in targets:
            restart_fresh()
            import os

            saved = os.environ.get("PYTHONMALLOC")
            if proxy_malloc is not None:  # the proxy's allocator only: this process keeps its own
                os.environ["PYTHONMALLOC"] = proxy_malloc
            try:
                target = TARGETS[key](engine.base).start()
            finally:
                if saved is None:
                    os.environ.pop("PYTHONMALLOC", None)
                else:
                    os.environ["PYTHONMALLOC"] = saved
            try:
                assert target.proc is not None
                if pin_proxy is not None:
                    for proc in [
                        psutil.Process(target.proc.pid),
                        *psutil.Process(target.proc.pid).children(True),
                    ]:
                        pin(proc.pid, {pin_proxy})
                asyncio.run(level(target, engine.base, 4, 2, 500, rss_start=1.0))  # warm-up
                rss_start = psutil.Process(target.proc.pid).memory_info().rss
                modes = [False, True] if dialects and key == "ours" else [False]
                for mode in modes:
                    for n in levels:
                        try:
                            row = asyncio.run(
                                level(
                                    target,
                                    engine.base,
                                    n,
                                    turns,
                                    tool_chars,
                                    dialects=mode,
                                    rss_start=rss_start,
                                    think_s=think_s,
                                )
                            )
                        except Exception as exc:
                            row = {
                                "target": target.name,
                                "sessions": n,
                                "dialects": mode,
                                "error": f"{type(exc).__name__}: {exc}"[:300],
                            }
                        rows.append(row)
                        on_row(row)
            finally:
                target.stop()
    finally:
        engine.stop()
    for row in rows:
        base = next(
            (
                r
                for r in rows
                if r["target"] == row["target"]
                and r.get("dialects") == row.get("dialects")
                and "error" not in r
            ),
            None,
        )
        if "error" not in row and base is not None:
            row["cpu_vs_first_level"] = row["cpu_ms_per_turn"] / base["cpu_ms_per_turn"]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    head = (
        "| proxy | sessions | turns | turns/s | CPU ms/turn | vs 1 session | p50 / p99 ms | "
        "added p50 / p99 ms | KB per open session | left: sessions, fds, tcp | RSS vs start (vs this level's) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    )
    lines = [head]
    for r in rows:
        name = r["target"] + (" (4 dialects)" if r.get("dialects") else "")
        name += f", {r['think_s']:g} s between turns" if r.get("think_s") else ""
        if "error" in r:
            lines.append(f"| {name} | {r['sessions']} | failed: {r['error']} |||||||||")
            continue
        added = f"{r['added_p50_ms']:.1f} / {r['added_p99_ms']:.1f}" if "added_p50_ms" in r else "n/a"
        lines.append(
            f"| {name} | {r['sessions']} | {r['turns']} | {r['turns_per_s']:.0f} | {r['cpu_ms_per_turn']:.2f} | "
            f"{r.get('cpu_vs_first_level', 1):.2f}x | {r['p50_ms']:.0f} / {r['p99_ms']:.0f} | {added} | "
            f"{r['mem_kb_per_session']:.0f} | {r['left_sessions']}, {r['left_fds']}, {r['left_tcp']} | "
            f"{r['rss_vs_start']:.3f} ({r.get('rss_vs_level_start', float('nan')):.3f}) |"
        )
    split = [r for r in rows if "beyond_engine_p50_ms" in r]
    if split:
        lines += [
            "",
            "Per request, from the replies' own timing (ours: `Server-Timing`; direct: the engine's "
            "`x-engine-ms`): the client's milliseconds beyond the engine's, p50 / p99.",
            "",
            "| proxy | sessions | through the proxy | of which in the proxy's handler | of which its wait for the "
            "request body | direct to the engine |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in split:
            name = r["target"] + (f", {r['think_s']:g} s between turns" if r.get("think_s") else "")
            handler = (
                f"{r['in_proxy_p50_ms']:.1f} / {r['in_proxy_p99_ms']:.1f}"
                if "in_proxy_p50_ms" in r
                else "n/a"
            )
            direct = (
                f"{r['direct_beyond_engine_p50_ms']:.1f} / {r['direct_beyond_engine_p99_ms']:.1f}"
                if "direct_beyond_engine_p50_ms" in r
                else "n/a"
            )
            body = f"{r['body_p50_ms']:.1f} / {r['body_p99_ms']:.1f}" if "body_p50_ms" in r else "n/a"
            lines.append(
                f"| {name} | {r['sessions']} | {r['beyond_engine_p50_ms']:.1f} / {r['beyond_engine_p99_ms']:.1f} "
                f"| {handler} | {body} | {direct} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--levels", default="1,10,100,1000", help="concurrent sessions per row (comma-separated)"
    )
    parser.add_argument("--turns", type=int, default=8, help="requests per conversation")
    parser.add_argument("--tool-chars", type=int, default=11400, help="characters of new text per turn")
    parser.add_argument("--targets", default="ours,reference", help="ours, reference (comma-separated)")
    parser.add_argument(
        "--dialects", action="store_true", help="also replay recorded sessions of all 4 dialects"
    )
    parser.add_argument("--prefill-tps", type=float, default=20000.0)
    parser.add_argument("--decode-tps", type=float, default=100.0)
    parser.add_argument(
        "--pin-proxy", type=int, help="run the proxy alone on this CPU, the load and the engine on the rest"
    )
    parser.add_argument(
        "--proxy-malloc", help="PYTHONMALLOC for the proxy process (malloc: glibc's, which trims finer)"
    )
    parser.add_argument(
        "--think-s",
        type=float,
        default=0.0,
        help="mean seconds (exponential) a session waits before each turn, as a harness running its tools "
        "(0: back to back, the heaviest load)",
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in ("ours", "reference")]
    if unknown or not levels or min(levels) < 1:
        parser.error(f"--targets takes ours, reference (got {unknown}); --levels positive integers")
    if "reference" in targets and not servers.REF_PYTHON.exists():
        print("reference venv missing (.cache/reference-venv): measuring ours only", file=sys.stderr)
        targets.remove("reference")
    rows = run(
        targets,
        levels,
        args.turns,
        args.tool_chars,
        dialects=args.dialects,
        prefill_tps=args.prefill_tps,
        decode_tps=args.decode_tps,
        pin_proxy=args.pin_proxy,
        proxy_malloc=args.proxy_malloc,
        think_s=args.think_s,
        on_row=lambda r: print(json.dumps(r), file=sys.stderr, flush=True),
    )
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if any("error" in r for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
