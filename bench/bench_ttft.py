"""Streamed time to first byte and to first text, through the proxy vs vLLM direct (and the reference).

The same streamed chat request (greedy, fixed max_tokens, no tools so the reply is text) goes straight to
vLLM's `/v1/chat/completions`, through `openenv proxy` and, when `.cache/reference-venv` holds it, through
the reference capture server. Targets alternate order every round so load drift hits all alike. Per
request: TTFB (first body byte), TTFT (first event carrying reply text) and the whole reply. Besides the
ratio of medians, each round's own ratio (this target's request / vLLM direct's, sent back to back) is
kept, and their median reported ("paired"): load that drifts between rounds cancels out of it.

    .venv/bin/python bench/bench_ttft.py --vllm-url http://127.0.0.1:PORT [--requests 20] [--runs 3] [--json]
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

sys.path.insert(0, str(Path(__file__).parent))
import bench_proxy

MAX_TOKENS = 64
MESSAGES = [{"role": "user", "content": "Write a long story about a robot who learns to code."}]


def one(
    client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any] | None
) -> tuple[float, float, float]:
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
            if choices and ((choices[0].get("delta") or {}).get("content") or choices[0].get("text")):
                return True
    return False


def _capture_body() -> dict[str, Any]:
    """The `/v1/completions` body `VLLMBackend.generate_stream` sends for MESSAGES (same sampling)."""
    from openenv.capture.canonical import Message, TextPart
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    _, ids = renderer.full_prompt([Message(role="user", parts=(TextPart(text=MESSAGES[0]["content"]),))], [])
    return {
        "model": "tiny",
        "prompt": ids,
        "logprobs": 0,
        "return_token_ids": True,
        "skip_special_tokens": False,
        "temperature": 0.0,
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }


def measure(vllm_url: str, requests: int) -> list[dict[str, Any]]:
    """One run: a row per target (medians, their ratios to vLLM direct, and the paired ratios)."""
    body = {
        "model": "tiny",
        "messages": MESSAGES,
        "temperature": 0.0,
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }
    chat = f"{vllm_url}/v1/chat/completions"
    targets: dict[str, tuple[str, dict[str, str], Any]] = {"vLLM direct": (chat, {}, None)}
    # What the proxy itself asks vLLM for (prompt ids, the sampled ids and logprobs): vLLM's own cost of
    # capturing, so the proxy's share of the gap shows apart from it.
    targets["vLLM direct, as the proxy asks (ids, logprobs)"] = (
        f"{vllm_url}/v1/completions",
        {},
        _capture_body(),
    )
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
                for name, (url, headers, extra) in order:
                    sample = one(client, url, headers, extra if isinstance(extra, dict) else body)
                    if i >= 2:  # two warm-up rounds
                        times[name].append(sample)
    finally:
        for _, _, proc in targets.values():
            if proc is not None and not isinstance(proc, dict):
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
            row[f"{key}_paired"] = statistics.median(
                s[k] / d[k] for s, d in zip(samples, direct, strict=True)
            )
        rows.append(row)
    return rows


def runs(vllm_url: str, requests: int, count: int) -> list[dict[str, Any]]:
    """`count` runs, each with the load average (1 min) before and after it and the keep-alive interval."""
    from openenv.capture.streaming import keepalive_interval

    out = []
    for _ in range(count):
        before = os.getloadavg()[0]
        rows = measure(vllm_url, requests)
        out.append(
            {
                "rows": rows,
                "load": [before, os.getloadavg()[0]],
                "keepalive_s": keepalive_interval(),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-url", required=True)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    done = runs(args.vllm_url.rstrip("/"), args.requests, args.runs)
    if args.json:
        print(json.dumps(done, indent=2))
        return
    for run in done:
        print(f"run at {run['when']}, load average {run['load'][0]:.1f} -> {run['load'][1]:.1f}")
        print(
            "| target | n | TTFB ms | x direct | paired | first text ms | x direct | paired | whole reply ms "
            "| x direct |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in run["rows"]:
            print(
                f"| {r['target']} | {r['n']} | {r['ttfb_ms']:.1f} | {r['ttfb_ratio']:.2f} | {r['ttfb_paired']:.2f} | "
                f"{r['ttft_ms']:.1f} | {r['ttft_ratio']:.2f} | {r['ttft_paired']:.2f} | {r['total_ms']:.1f} | "
                f"{r['total_ratio']:.2f} |"
            )


if __name__ == "__main__":
    main()
