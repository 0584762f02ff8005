"""The stand-in engine's score replies are vLLM's: a row per prompt position, read by position.

`bench/engines.py` builds a score reply as JSON text from a template (the engine stands in for the model,
so its own cost should be close to nothing); the proxy reads the rows by position, so every row must be
there, `null` first, each keyed by its own token id, and our `VLLMBackend` must read the completion's.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import engines
import servers

from openenv.capture.backends import VLLMBackend


@pytest.fixture(scope="module")
def instant() -> Iterator[str]:
    server = servers.spawn(
        lambda port: [sys.executable, str(Path(engines.__file__)), "instant", "--port", str(port)],
        "/health",
        timeout=240,
    )
    try:
        yield server.base
    finally:
        server.stop()


def test_a_score_reply_has_every_prompt_row_as_vllm_writes_it(instant: str) -> None:
    prompt = [7, 151643, 0, 42, 42, 99999]
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    reply = httpx.post(f"{instant}/v1/completions", json=body, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"
    assert reply.json() == {
        "choices": [
            {
                "index": 0,
                "text": "",
                "token_ids": [],
                "prompt_logprobs": [None] + [{str(t): {"logprob": engines.LOGPROB}} for t in prompt[1:]],
                "finish_reason": "length",
                "logprobs": {"token_logprobs": []},
            }
        ]
    }
    one = httpx.post(f"{instant}/v1/completions", json={**body, "prompt": [5]}, timeout=30)
    assert one.json()["choices"][0]["prompt_logprobs"] == [None]


def test_the_proxy_backend_reads_a_long_prompts_completion_rows(instant: str) -> None:
    prompt, completion = list(range(13_000)), [101, 102, 103]

    async def score() -> list[float]:
        backend = VLLMBackend(instant)
        try:
            return await backend.score(prompt, completion)
        finally:
            await backend.aclose()

    assert asyncio.run(score()) == [engines.LOGPROB] * 3
    raw = httpx.post(
        f"{instant}/v1/completions",
        json={"model": "tiny", "prompt": prompt + completion, "max_tokens": 1, "prompt_logprobs": 0},
        timeout=30,
    ).content
    rows = json.loads(raw)["choices"][0]["prompt_logprobs"]
    assert len(rows) == 13_003 and rows[0] is None
    assert all(list(row) == [str(t)] for row, t in zip(rows[1:], prompt[1:] + completion, strict=True))


def test_a_paced_engine_times_its_score_replies_in_a_header_and_keeps_the_rows() -> None:
    server = servers.spawn(
        lambda port: [
            *(sys.executable, str(Path(engines.__file__)), "paced", "--port", str(port)),
            *("--prefill-tps", "100"),  # 0.05 s for five prompt tokens: the header shows the hold
        ],
        "/health",
        timeout=240,
    )
    try:
        prompt = [7, 0, 42, 42, 5]
        body = {"model": "tiny", "prompt": prompt, "max_tokens": 1, "prompt_logprobs": 0}
        with httpx.Client(timeout=30) as client:  # twenty: a hold that can end early shows in a few
            replies = [client.post(f"{server.base}/v1/completions", json=body) for _ in range(20)]
        assert all(r.status_code == 200 for r in replies)
        assert min(float(r.headers["x-engine-ms"]) for r in replies) >= 50
        reply = replies[-1]
        rows = reply.json()["choices"][0]["prompt_logprobs"]
        assert rows == [None] + [{str(t): {"logprob": engines.LOGPROB}} for t in prompt[1:]]
        assert "engine_ms" not in reply.text
    finally:
        server.stop()
