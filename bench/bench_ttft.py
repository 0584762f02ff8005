"""Streamed time to first byte and to first text, through the proxy vs vLLM direct (and the reference).

The same streamed chat request (greedy, fixed max_tokens, no tools so the reply is text) goes straight to
vLLM's `/v1/chat/completions`, through `openenv proxy` and, when `.cache/bench/ref-venv` holds it, through
the reference capture server. Targets alternate order every round so load drift hits all alike. Per
request: TTFB (first body byte), TTFT (first event carrying reply text) and the whole reply.

    .venv/bin/python bench/bench_ttft.py --vllm-url http://127.0.0.1:PORT [--requests 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import bench_proxy  # noqa: E402

MAX_TOKENS = 64
MESSAGES = [{"role": "user", "content": "Write a long story about a robot who learns to code."}]


def one(client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[float, float, float]:
    """(first byte, first text, last byte) in seconds."""
    t0 = time.perf_counter()
    first_byte = first_text = None
    buffer = ""
    with client.stream("POST", url, json=body, headers=headers) as r:
        r.raise_for_status()
        for chunk in r.iter_text():
            now = time.perf_counter()
            if first_byte is None:
                first_byte = now
            if first_text is None:
                buffer += chunk
                if _has_text(buffer):
                    first_text = now
    end = time.perf_counter()
    return (first_byte or end) - t0, (first_text or end) - t0, end - t0


def _has_text(buffer: str) -> bool:
    for line in buffer.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            try:
                data = json.loads(line[6:])
            except ValueError:
                continue  # a partial line
            choices = data.get("choices") or []
            if choices and (choices[0].get("delta") or {}).get("content"):
                return True
    return False


def measure(vllm_url: str, requests: int) -> list[dict[str, Any]]:
    body = {"model": "tiny", "messages": MESSAGES, "temperature": 0.0, "max_tokens": MAX_TOKENS, "stream": True}
    chat = f"{vllm_url}/v1/chat/completions"
    targets: dict[str, tuple[str, dict[str, str], Any]] = {"vLLM direct": (chat, {}, None)}
    ours, ours_url = bench_proxy._start_ours(vllm_url)
    targets["openenv proxy"] = (ours_url, {}, ours)
    reference = bench_proxy._start_reference(vllm_url)
    if reference is not None:
        targets[f"reference {bench_proxy.REF_VERSION}"] = (*reference[1], reference[0])
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in targets}
    try:
        with httpx.Client(timeout=120) as client:
            for i in range(requests + 2):
                order = list(targets.items()) if i % 2 == 0 else list(reversed(targets.items()))
                for name, (url, headers, _) in order:
                    sample = one(client, url, headers, body)
                    if i >= 2:  # two warm-up rounds
                        times[name].append(sample)
    finally:
        for _, _, proc in targets.values():
            if proc is not None:
                proc.terminate()
                proc.wait(20)
    direct = times["vLLM direct"]
    rows = []
    for name, samples in times.items():
        row: dict[str, Any] = {"target": name, "n": len(samples)}
        for k, key in enumerate(("ttfb", "ttft", "total")):
            ours_ms = 1000 * statistics.median(s[k] for s in samples)
            base_ms = 1000 * statistics.median(s[k] for s in direct)
            row[f"{key}_ms"] = ours_ms
            row[f"{key}_ratio"] = ours_ms / base_ms
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-url", required=True)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.vllm_url.rstrip("/"), args.requests)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| target | n | TTFB ms | x direct | first text ms | x direct | whole reply ms | x direct |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']} | {r['n']} | {r['ttfb_ms']:.1f} | {r['ttfb_ratio']:.2f} | {r['ttft_ms']:.1f} | "
              f"{r['ttft_ratio']:.2f} | {r['total_ms']:.1f} | {r['total_ratio']:.2f} |")


if __name__ == "__main__":
    main()
