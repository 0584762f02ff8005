"""`LocalBackend`: in-process transformers on CPU, the embedded default when no vLLM is running.

Logprobs are raw: `log_softmax` of the model's logits before temperature or top-k/p, the same
convention vLLM uses by default, so sequences from either backend train the same way. They come from
one teacher-forced forward pass over prompt + completion, the computation a trainer repeats; the
KV-cached decode that sampled the tokens drifts from it by up to ~1e-3 on long multi-turn prompts. One lock
serializes the model; calls run in a worker thread so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openenv.capture.backends.base import Generation
from openenv.capture.canonical import SamplingParams
from openenv.errors import BackendUnavailable

__all__ = ["LocalBackend"]


class LocalBackend:
    """A causal LM loaded with transformers (float32, CPU by default).

    Args:
        model: the model folder, or a live model object (e.g. a trainer's policy), which is used as is:
            its weights, device, dtype and train/eval mode stay the caller's, so every request samples
            the current weights.
        device: a torch device string (ignored for a live model).
        dtype: a torch dtype name (ignored for a live model).
    """

    name = "local"

    def __init__(self, model: str | Path | Any, *, device: str = "cpu", dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self._torch = torch
        if isinstance(model, str | Path):
            self.device = device
            self.model = AutoModelForCausalLM.from_pretrained(str(model), dtype=getattr(torch, dtype)).to(device)
            self.model.eval()
        else:
            self.model, self.device = model, str(next(model.parameters()).device)
        config = self.model.config
        self._context_window = int(getattr(config, "max_position_embeddings", 32768))
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._lock = threading.Lock()

    @property
    def context_window(self) -> int:
        return self._context_window

    async def ready(self) -> None:
        """Nothing to learn: the window came with the weights."""

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        return await asyncio.to_thread(self._guarded, self._generate, list(prompt_ids), params)

    async def score(self, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
        return await asyncio.to_thread(self._guarded, self._score, list(prompt_ids), list(completion_ids))

    async def aclose(self) -> None:
        return None

    def _guarded(self, fn: Any, *args: Any) -> Any:
        with self._lock:
            try:
                return fn(*args)
            except (RuntimeError, ValueError) as exc:  # torch failures (OOM, shapes) are the backend's
                raise BackendUnavailable(f"the local backend failed: {type(exc).__name__}: {exc}") from None

    def _generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        torch = self._torch
        if params.seed is not None:
            torch.manual_seed(params.seed)
        inputs = torch.tensor([prompt_ids], device=self.device)
        greedy = params.temperature is not None and params.temperature <= 0
        options: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": params.max_tokens or 256}
        if not greedy:
            options.update(temperature=params.temperature if params.temperature is not None else 1.0,
                           top_p=params.top_p if params.top_p is not None else 1.0,
                           top_k=params.top_k if params.top_k is not None else 0)
        with torch.no_grad():
            out = self.model.generate(inputs, attention_mask=torch.ones_like(inputs),
                                      pad_token_id=next(iter(self.eos_ids), 0), **options)
        ids = out[0, len(prompt_ids):].tolist()
        logprobs = self._score(prompt_ids, ids) if ids else []
        stopped = bool(ids) and ids[-1] in self.eos_ids
        return Generation(ids, logprobs, "stop" if stopped else "length")

    def _score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        torch = self._torch
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        with torch.no_grad():
            logits = self.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        index = torch.tensor(completion_ids, device=self.device).unsqueeze(1)
        return logprobs.gather(1, index).squeeze(1).tolist()  # type: ignore[no-any-return]
