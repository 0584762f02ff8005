"""The vLLM backend's HTTP client: CPU per engine call, `VLLMBackend` (`EngineHTTP`) vs aiohttp and httpx.

    .venv/bin/python bench/bench_backend_client.py [--prompts 1000,8000,28000] [--calls 300]

Each call posts a token-id prompt to `/v1/completions` of the instant engine (bench/engines.py, another
process) and decodes the reply, the way the proxy does once per turn. Measured in one run, alternating:
`VLLMBackend.generate` as shipped (`EngineHTTP`, msgspec), and the same request body through the two
clients the backend used before: an `aiohttp.ClientSession` set up as it was (no cookie jar, no
decompression) and `httpx.AsyncClient`; all keep-alive, on uvloop. CPU-ms is this process's
user+system time per call; "x / ours" are the ratios. Nothing is asserted in tests.
"""

from __future__ import annotations

import argparse
import resource
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import msgspec
import uvloop
from bench_proxy import _table, start_engine

from openenv.capture.backends import TokenIds, VLLMBackend
from openenv.capture.canonical import SamplingParams

PARAMS = SamplingParams(max_tokens=8, temperature=1.0)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _cpu_ms_per_call(call: Callable[[], Awaitable[object]], calls: int) -> float:
    """This process's CPU-ms per `call()`, after five warm-up calls."""
    for _ in range(5):
        await call()
    c0 = _cpu()
    for _ in range(calls):
        await call()
    return 1000 * (_cpu() - c0) / calls


async def ours(url: str, prompt: TokenIds, calls: int) -> float:
    backend = VLLMBackend(url, model="tiny", context_window=1 << 20)
    try:
        return await _cpu_ms_per_call(lambda: backend.generate(prompt, PARAMS), calls)
    finally:
        await backend.aclose()


async def with_aiohttp(url: str, prompt: TokenIds, calls: int) -> float:
    import aiohttp

    body = VLLMBackend(url, model="tiny", context_window=1 << 20)._body(prompt, PARAMS)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=256, keepalive_timeout=4.0),
        headers={"content-type": "application/json"},
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
        cookie_jar=aiohttp.DummyCookieJar(),
    ) as http:

        async def call() -> None:
            async with http.post(f"{url}/v1/completions", data=msgspec.json.encode(body)) as r:
                raw = await r.read()
            assert r.status == 200
            msgspec.json.decode(raw)

        return await _cpu_ms_per_call(call, calls)


async def with_httpx(url: str, prompt: TokenIds, calls: int) -> float:
    body = VLLMBackend(url, model="tiny", context_window=1 << 20)._body(prompt, PARAMS)
    async with httpx.AsyncClient(
        base_url=url, timeout=600, limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)
    ) as http:

        async def call() -> None:
            r = await http.post(
                "/v1/completions",
                content=msgspec.json.encode(body),
                headers={"content-type": "application/json"},
            )
            r.raise_for_status()
            msgspec.json.decode(r.content)

        return await _cpu_ms_per_call(call, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", default="1000,8000,28000", help="prompt lengths in tokens")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each is kept")
    args = parser.parse_args()
    engine = start_engine()
    url = engine.base
    rows = []
    try:
        for n in (int(p) for p in args.prompts.split(",")):
            ids = [100 + i % 3000 for i in range(n)]
            # as the proxy sends a turn that extends a sequence: ids that carry their JSON text
            text = bytearray(msgspec.json.encode(ids)[1:-1])
            prompt = TokenIds(ids, buffer=text, length=len(text))
            clients = {"ours": ours, "aiohttp": with_aiohttp, "httpx": with_httpx}
            best = dict.fromkeys(clients, float("inf"))
            for _ in range(args.rounds):
                for name, client in clients.items():
                    best[name] = min(best[name], uvloop.run(client(url, prompt, args.calls)))
            rows.append(
                {
                    "prompt": n,
                    **best,
                    "aiohttp_ratio": best["aiohttp"] / best["ours"],
                    "httpx_ratio": best["httpx"] / best["ours"],
                }
            )
    finally:
        engine.stop()
    print(f"\nCPU-ms per engine call (best of {args.rounds} rounds x {args.calls} calls), instant engine")
    print(
        _table(
            rows,
            [
                ("prompt", "prompt tokens", "d"),
                ("ours", "VLLMBackend (EngineHTTP)", ".3f"),
                ("aiohttp", "aiohttp", ".3f"),
                ("httpx", "httpx.AsyncClient", ".3f"),
                ("aiohttp_ratio", "aiohttp / ours", ".2f"),
                ("httpx_ratio", "httpx / ours", ".2f"),
            ],
        )
    )


if __name__ == "__main__":
    main()
