"""`LocalBackend`: in-process transformers on CPU, the embedded default when no vLLM is running.

Logprobs are the sampling distribution's: `log_softmax(logits / temperature)` of the logits the token was
sampled from, what TRL recomputes and what vLLM returns with `--logprobs-mode processed_logprobs`
(`capture/logprob_mode.py`; the verdict is `processed`). Greedy (temperature 0) applies none. They come from
one teacher-forced forward pass over prompt + completion, the computation a trainer repeats; the
KV-cached decode that sampled the tokens drifts from it by up to ~1e-3 on long multi-turn prompts. One lock
serializes the model; calls run in a worker thread so the event loop keeps serving. A cancelled call (its
client went away) and `aclose()` stop the generation at the next token, so no thread keeps a core busy
for a reply nobody will read, and shutdown is prompt.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from openenv.capture.backends.base import Generation
from openenv.capture.canonical import SamplingParams
from openenv.capture.logprob_mode import LogprobMode
from openenv.errors import BackendUnavailable
from openenv.models.progress import quiet_progress

__all__ = ["LocalBackend"]


class LocalBackend:
    """A causal LM loaded with transformers (float32, CPU by default).

    Args:
        model: the model folder, or a live model object (e.g. a trainer's policy), which is used as is:
            its weights, device, dtype and train/eval mode stay the caller's, so every request samples
            the current weights.
        device: a torch device string (ignored for a live model).
        dtype: a torch dtype name (ignored for a live model).
        autocast: a context factory every forward runs under, in the worker thread (autocast state is
            per thread). Pass the trainer's `accelerator.autocast` with a trainer's live model: TRL's
            GRPOConfig defaults to `bf16=True`, also on CPU, and the trainer computes its logprobs under
            bf16 autocast. Once `accelerator.prepare` has wrapped the model's forward it autocasts anyway;
            before that (a rollout ahead of training), a float32 forward here differed from the
            trainer's recompute by ~1e-2 per token, and under the same context by ~1e-6.
    """

    name = "local"
    score_logprob_mode = "processed"  # `score` divides by the temperature it is given

    def __init__(
        self,
        model: str | Path | Any,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        autocast: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self._torch = torch
        if isinstance(model, str | Path):
            self.device = device
            with quiet_progress():
                self.model = AutoModelForCausalLM.from_pretrained(str(model), dtype=getattr(torch, dtype)).to(
                    device
                )
            self.model.eval()
        else:
            self.model, self.device = model, str(next(model.parameters()).device)
        config = self.model.config
        self._context_window = int(getattr(config, "max_position_embeddings", 32768))
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self._lock = threading.Lock()
        self._autocast = autocast or nullcontext
        self._running: set[threading.Event] = set()  # the stop flags of calls in progress

    @property
    def context_window(self) -> int:
        return self._context_window

    async def ready(self) -> None:
        """Nothing to learn: the window came with the weights."""

    async def logprob_mode(self) -> LogprobMode:
        """`processed`: this backend divides the logits by the temperature before `log_softmax`."""
        return "processed"

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        stop = threading.Event()
        self._running.add(stop)
        try:
            return await asyncio.to_thread(self._guarded, self._generate, list(prompt_ids), params, stop)
        except asyncio.CancelledError:
            stop.set()  # the worker thread ends at its next token
            raise
        finally:
            self._running.discard(stop)

    async def score(
        self, prompt_ids: Sequence[int], completion_ids: Sequence[int], *, temperature: float | None = None
    ) -> list[float]:
        stop = threading.Event()
        self._running.add(stop)
        try:
            return await asyncio.to_thread(
                self._guarded, self._score_unless, list(prompt_ids), list(completion_ids), stop, temperature
            )
        except asyncio.CancelledError:
            stop.set()  # a call still queued on the lock never runs its forward pass
            raise
        finally:
            self._running.discard(stop)

    def _score_unless(
        self,
        prompt_ids: list[int],
        completion_ids: list[int],
        stop: threading.Event,
        temperature: float | None,
    ) -> list[float]:
        if stop.is_set():
            raise BackendUnavailable("the scoring was cancelled before it reached the model")
        return self._score(prompt_ids, completion_ids, temperature)

    async def aclose(self) -> None:
        """Stop every generation in progress (its server is shutting down); later calls still work, since
        a live model may be shared by several servers."""
        for stop in list(self._running):
            stop.set()

    def _guarded(self, fn: Any, *args: Any) -> Any:
        with self._lock, self._autocast():
            try:
                return fn(*args)
            except (RuntimeError, ValueError) as exc:  # torch failures (OOM, shapes) are the backend's
                raise BackendUnavailable(f"the local backend failed: {type(exc).__name__}: {exc}") from None

    def _generate(self, prompt_ids: list[int], params: SamplingParams, stop: threading.Event) -> Generation:
        from transformers import StoppingCriteria, StoppingCriteriaList

        torch = self._torch

        class _Stopped(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool)

        if stop.is_set():
            raise BackendUnavailable("the request was cancelled before it reached the model")
        if params.seed is not None:
            torch.manual_seed(params.seed)
        inputs = torch.tensor([prompt_ids], device=self.device)
        greedy = params.temperature is not None and params.temperature <= 0
        options: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": params.max_tokens or 256}
        if not greedy:
            options.update(
                temperature=params.temperature if params.temperature is not None else 1.0,
                top_p=params.top_p if params.top_p is not None else 1.0,
                top_k=params.top_k if params.top_k is not None else 0,
            )
        with torch.no_grad():
            out = self.model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                pad_token_id=next(iter(self.eos_ids), 0),
                stopping_criteria=StoppingCriteriaList([_Stopped()]),
                **options,
            )
        if stop.is_set():
            raise BackendUnavailable("the generation was cancelled")
        ids = out[0, len(prompt_ids) :].tolist()
        logprobs = self._score(prompt_ids, ids, None if greedy else params.temperature) if ids else []
        stopped = bool(ids) and ids[-1] in self.eos_ids
        return Generation(ids, logprobs, "stop" if stopped else "length")

    def _score(
        self, prompt_ids: list[int], completion_ids: list[int], temperature: float | None = None
    ) -> list[float]:
        """Teacher-forced logprobs of `completion_ids` under `log_softmax(logits / temperature)` (no division
        for None or 0: greedy has no temperature). Only the positions that predict them get logits
        (`logits_to_keep`): full-vocabulary logits for a whole long prompt cost gigabytes (the red-team's
        ~127k-token prompt took the host to 9.3 GB), and none of them is read."""
        torch = self._torch
        ids = torch.tensor([prompt_ids + completion_ids], device=self.device)
        keep = len(completion_ids) + 1
        with torch.no_grad():
            try:
                logits = self.model(ids, logits_to_keep=keep).logits[0, -keep:-1].float()
            except TypeError:  # a live model whose forward predates `logits_to_keep`
                logits = self.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
        if temperature is not None and temperature > 0 and temperature != 1.0:
            logits = logits / temperature  # as TRL's selective_log_softmax(logits / temperature)
        logprobs = torch.log_softmax(logits, dim=-1)
        index = torch.tensor(completion_ids, device=self.device).unsqueeze(1)
        return logprobs.gather(1, index).squeeze(1).tolist()
