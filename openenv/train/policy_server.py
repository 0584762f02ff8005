"""Policy freshness: the capture server a training run's episodes generate through.

- `local` (CPU): the proxy's backend *is* the trainer's in-memory model (`LocalBackend(live_model)`),
  so every sampled turn uses the weights of the current step, with no copy and no sync.
- `vllm`: the proxy generates from the engine's vLLM server(s). For fresh samples this must be the
  server TRL keeps in sync: `GRPOConfig(use_vllm=True, vllm_mode="server", vllm_server_base_url=URL)`
  (started with `trl vllm-serve`), which TRL updates before each rollout (`sync_weights` runs before
  `rollout_func` whenever the step changed). A plain `vllm serve` that TRL does not update samples the
  initial weights forever; the rollout then trains off-policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openenv.capture.backends.base import Backend
from openenv.capture.backends.named import make_backend
from openenv.capture.backends.vllm_engines import split_urls
from openenv.capture.engine import CapturePool, EngineSpec
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest

__all__ = ["model_folder", "policy_server", "trainer_engine"]


def model_folder(trainer: Any, override: str | Path | None = None) -> Path:
    """The folder with the tokenizer and chat template the proxy renders prompts with."""
    if override is not None:
        return Path(override)
    model = trainer.accelerator.unwrap_model(trainer.model)
    name = getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "")
    if not name or not Path(name).is_dir():
        raise BadRequest(f"cannot find the policy's tokenizer folder (name_or_path={name!r}); pass model=")
    return Path(name)


def trainer_engine(trainer: Any, engine: EngineSpec) -> EngineSpec:
    """`engine` with what it leaves to the trainer filled in, once per run: the tokenizer folder (None: the
    trainer model's `name_or_path`) and, for `vllm`, the URLs (none: `GRPOConfig.vllm_server_base_url`).

    Raises:
        BadRequest: `vllm` without a URL either way, or no tokenizer folder could be found.
    """
    folder = str(model_folder(trainer, engine.model))
    if engine.backend == "local":
        return EngineSpec("local", model=folder)
    urls = engine.vllm_urls or split_urls(
        getattr(getattr(trainer, "args", None), "vllm_server_base_url", None)
    )
    if not urls:
        raise BadRequest(
            "a vllm engine needs its URL: EngineSpec.of('vllm', vllm_url=URL) or "
            "GRPOConfig(vllm_server_base_url=...)"
        )
    return EngineSpec("vllm", model=folder, vllm_urls=urls)


def policy_server(trainer: Any, engine: EngineSpec, pool: CapturePool) -> CaptureServer:
    """The run's capture server whose backend samples the trainer's current policy, from the run's `pool`
    (started on first use, its admin API locked, as every episode's server: the harnesses being trained
    reach its port; stopped when the run closes its pool).

    Args:
        trainer: the GRPO trainer; with the `local` engine its in-memory model samples.
        engine: the run's engine (what it leaves to the trainer is filled by `trainer_engine`); several
            URLs: `VLLMEngines`.
        pool: the run's capture pool.

    Raises:
        BadRequest: `vllm` without a URL, `local` with gradient checkpointing on, or no tokenizer folder
            could be found.
    """
    if engine.backend == "local" and getattr(getattr(trainer, "args", None), "gradient_checkpointing", False):
        # TRL's GRPOConfig turns it on by default. The local backend samples the very model being trained,
        # and with checkpointing on that model runs without its KV cache while it samples: replies came out
        # cut short with malformed tool calls, silently (found by the issue-21 learning run).
        raise BadRequest(
            "the local engine samples the trainer's own model, which gradient checkpointing breaks "
            "for generation: pass GRPOConfig(gradient_checkpointing=False), or use a vllm engine"
        )
    engine = trainer_engine(trainer, engine)
    if engine.backend == "local":

        def live_sampler() -> Backend:
            live = trainer.accelerator.unwrap_model(trainer.model)
            # The trainer's own precision context (bf16 autocast by GRPOConfig's default, also on CPU), also
            # before accelerate has wrapped the model's forward: logprobs computed as the trainer computes them.
            return make_backend("local", model=live, autocast=trainer.accelerator.autocast)

        return pool.acquire(engine, backend=live_sampler)
    return pool.acquire(engine)
