"""Policy freshness: the capture server a training run's episodes generate through.

- `local` (CPU): the proxy's backend *is* the trainer's in-memory model (`LocalBackend(live_model)`),
  so every sampled turn uses the weights of the current step, with no copy and no sync.
- `vllm`: the proxy generates from the vLLM server at `vllm_url`. For fresh samples this must be the
  server TRL keeps in sync: `GRPOConfig(use_vllm=True, vllm_mode="server", vllm_server_base_url=URL)`
  (started with `trl vllm-serve`), which TRL updates before each rollout (`sync_weights` runs before
  `rollout_func` whenever the step changed). A plain `vllm serve` that TRL does not update samples the
  initial weights forever; the rollout then trains off-policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openenv.capture.backends.named import BackendName, make_backend
from openenv.capture.engine import EngineSpec, start_capture_server
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest

__all__ = ["model_folder", "policy_server"]


def model_folder(trainer: Any, override: str | Path | None = None) -> Path:
    """The folder with the tokenizer and chat template the proxy renders prompts with."""
    if override is not None:
        return Path(override)
    model = trainer.accelerator.unwrap_model(trainer.model)
    name = getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "")
    if not name or not Path(name).is_dir():
        raise BadRequest(f"cannot find the policy's tokenizer folder (name_or_path={name!r}); pass model=")
    return Path(name)


def policy_server(
    trainer: Any,
    *,
    backend: BackendName,
    model: str | Path | None = None,
    vllm_url: str | list[str] | None = None,
) -> CaptureServer:
    """Start a capture server whose backend samples the trainer's current policy (`start_capture_server`:
    its admin API locked, as every episode's server: the harnesses being trained reach its port).

    Raises:
        BadRequest: `vllm` without a URL, `local` with gradient checkpointing on, or no tokenizer folder
            could be found.
    """
    if backend == "local" and getattr(getattr(trainer, "args", None), "gradient_checkpointing", False):
        # TRL's GRPOConfig turns it on by default. The local backend samples the very model being trained,
        # and with checkpointing on that model runs without its KV cache while it samples: replies came out
        # cut short with malformed tool calls, silently (found by the issue-21 learning run).
        raise BadRequest(
            "backend='local' samples the trainer's own model, which gradient checkpointing breaks "
            "for generation: pass GRPOConfig(gradient_checkpointing=False), or use backend='vllm'"
        )
    folder = str(model_folder(trainer, model))
    if backend == "local":
        live = trainer.accelerator.unwrap_model(trainer.model)
        # The trainer's own precision context (bf16 autocast by GRPOConfig's default, also on CPU), also
        # before accelerate has wrapped the model's forward: logprobs computed as the trainer computes them.
        sampler = make_backend("local", model=live, autocast=trainer.accelerator.autocast)
        return start_capture_server(EngineSpec("local", model=folder), backend=sampler)
    url = vllm_url or getattr(trainer.args, "vllm_server_base_url", None)
    if not url:
        raise BadRequest("backend='vllm' needs vllm_url= or GRPOConfig(vllm_server_base_url=...)")
    return start_capture_server(
        EngineSpec.of("vllm", model=folder, vllm_url=url)
    )  # several URLs: VLLMEngines
