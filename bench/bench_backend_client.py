"""The vLLM backend's HTTP client: CPU per engine call, `VLLMBackend` (aiohttp) vs an httpx baseline.

    .venv/bin/python bench/bench_backend_client.py [--prompts 1000,8000,28000] [--calls 300]

Each call posts a token-id prompt to `/v1/completions` of the instant engine (bench/engines.py, another
process) and decodes the reply, the way the proxy does once per turn. Measured in one run, alternating:
`VLLMBackend.generate` as shipped (aiohttp, msgspec), and the same request through `httpx.AsyncClient`
(what the backend used before, with the same msgspec encoding), both keep-alive, on uvloop. CPU-ms is
this process's user+system time per call; "httpx / ours" is the ratio. Nothing is asserted in tests.
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import msgspec
import uvloop
from bench_proxy import _table, start_engine

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams

PARAMS = SamplingParams(max_tokens=8, temperature=1.0)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def ours(url: str, prompt: list[int], calls: int) -> float:
    backend = VLLMBackend(url, model="tiny", context_window=1 << 20)
    try:
        for _ in range(5):
            await backend.generate(prompt, PARAMS)
        c0 = _cpu()
        for _ in range(calls):
            await backend.generate(prompt, PARAMS)
        return 1000 * (_cpu() - c0) / calls
    finally:
        await backend.aclose()


async def with_httpx(url: str, prompt: list[int], calls: int) -> float:
    body = VLLMBackend(url, model="tiny", context_window=1 << 20)._body(prompt, PARAMS)
    async with httpx.AsyncClient(base_url=url, timeout=600,
                                 limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)) as http:
        async def call() -> None:
            r = await http.post("/v1/completions", content=msgspec.json.encode(body),
                                headers={"content-type": "application/json"})
            r.raise_for_status()
            msgspec.json.decode(r.content)

        for _ in range(5):
            await call()
        c0 = _cpu()
        for _ in range(calls):
            await call()
        return 1000 * (_cpu() - c0) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", default="1000,8000,28000", help="prompt lengths in tokens")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each is kept")
    args = parser.parse_args()
    engine, url = start_engine()
    rows = []
    try:
        for n in (int(p) for p in args.prompts.split(",")):
            prompt = [100 + i % 3000 for i in range(n)]
            best = {"ours": float("inf"), "httpx": float("inf")}
            for _ in range(args.rounds):
                best["ours"] = min(best["ours"], uvloop.run(ours(url, prompt, args.calls)))
                best["httpx"] = min(best["httpx"], uvloop.run(with_httpx(url, prompt, args.calls)))
            rows.append({"prompt": n, "ours": best["ours"], "httpx": best["httpx"],
                         "ratio": best["httpx"] / best["ours"]})
    finally:
        engine.terminate()
        engine.wait(20)
    print(f"\nCPU-ms per engine call (best of {args.rounds} rounds x {args.calls} calls), instant engine")
    print(_table(rows, [("prompt", "prompt tokens", "d"), ("ours", "VLLMBackend (aiohttp)", ".3f"),
                        ("httpx", "httpx.AsyncClient", ".3f"), ("ratio", "httpx / ours", ".2f")]))


if __name__ == "__main__":
    main()
