"""What processed logprobs cost: vLLM started with `--logprobs-mode processed_logprobs` vs `raw_logprobs`.

Every vLLM the project starts runs processed (a sampled token's logprob is then `log_softmax(logits / T)`,
the one a trainer recomputes; `openenv/capture/logprob_mode.py`). This measures what that costs per
request: the same vLLM build, model and flags, one server per mode, both up at once in this run; the
request is the one the proxy sends (`/v1/completions`, a token-id prompt, `logprobs: 0`,
`return_token_ids`, temperature 0.7, `max_tokens=32`). The servers alternate every round (AB, BA, ...),
and each round's own ratio (processed / raw, sent back to back) is kept: its median ("paired") cancels
load that drifts between rounds.

    .venv/bin/python bench/bench_logprobs_mode.py [--processed-url URL] [--raw-url URL] [--requests 24] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MAX_TOKENS = 32
TEMPERATURE = 0.7


def body(prompt: list[int]) -> dict[str, Any]:
    return {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "min_tokens": MAX_TOKENS,
        "temperature": TEMPERATURE,
        "logprobs": 0,
        "return_token_ids": True,
        "skip_special_tokens": False,
    }


def timed(client: httpx.Client, url: str, payload: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    reply = client.post(url + "/v1/completions", json=payload)
    reply.raise_for_status()
    return (time.perf_counter() - t0) * 1000


def measure(urls: dict[str, str], requests: int) -> dict[str, Any]:
    """Per mode: median/p90 ms over `requests` (after 2 warm-up rounds), and the paired median ratio."""
    prompt = [(7 * i) % 3000 + 10 for i in range(512)]
    times: dict[str, list[float]] = {mode: [] for mode in urls}
    ratios: list[float] = []
    order = list(urls)
    with httpx.Client(timeout=120) as client:
        for _ in range(2):
            for mode in order:
                timed(client, urls[mode], body(prompt))
        for i in range(requests):
            round_ = {
                mode: timed(client, urls[mode], body(prompt))
                for mode in (order if i % 2 == 0 else order[::-1])
            }
            for mode, ms in round_.items():
                times[mode].append(ms)
            ratios.append(round_["processed"] / round_["raw"])
    rows = [
        {
            "mode": mode,
            "n": len(ms),
            "median_ms": statistics.median(ms),
            "p90_ms": statistics.quantiles(ms, n=10)[-1] if len(ms) > 1 else ms[0],
        }
        for mode, ms in times.items()
    ]
    raw = next(r for r in rows if r["mode"] == "raw")
    for row in rows:
        row["ratio"] = row["median_ms"] / raw["median_ms"]
    return {
        "rows": rows,
        "paired_ratio": statistics.median(ratios),
        "load": os.getloadavg(),
        "max_tokens": MAX_TOKENS,
        "prompt_tokens": len(prompt),
        "temperature": TEMPERATURE,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--processed-url", help="a vLLM on the tiny model started processed (default: start one)"
    )
    parser.add_argument("--raw-url", help="one started with raw_logprobs (default: start one)")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    from openenv.capture.backends.vllm import VLLMBackend
    from openenv.models import tiny_model_path
    from openenv.soak.vllm_server import VLLMServer

    started: list[VLLMServer] = []
    urls: dict[str, str] = {}
    try:
        for mode, given in (("processed", args.processed_url), ("raw", args.raw_url)):
            if given is None:
                server = VLLMServer(tiny_model_path(), logprobs_mode=f"{mode}_logprobs").start(timeout=900)
                started.append(server)
                given = server.base_url
            urls[mode] = given.rstrip("/")
        import asyncio

        verdicts = {mode: asyncio.run(VLLMBackend(url).logprob_mode()) for mode, url in urls.items()}
        if verdicts != {"processed": "processed", "raw": "raw"}:
            raise SystemExit(f"the servers' probed modes are {verdicts}, not processed and raw")
        result = measure(urls, args.requests)
    finally:
        for server in started:
            server.stop()
    if args.json:
        print(json.dumps(result))
        return
    for row in result["rows"]:
        print(
            f"{row['mode']:>9}: median {row['median_ms']:.1f} ms, p90 {row['p90_ms']:.1f} ms, "
            f"{row['ratio']:.3f}x raw"
        )
    print(f"paired processed/raw: {result['paired_ratio']:.3f}x (load {result['load'][0]:.1f})")


if __name__ == "__main__":
    main()
