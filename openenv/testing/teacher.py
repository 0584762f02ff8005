"""An independent check of sampled logprobs: the model in float32 transformers, scoring teacher-forced.

Tests compare what the engine reported for each sampled token with this recompute over the same ids
(the capture dialects' exactness tests and the long-episode suite).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["load_teacher", "teacher_logprobs"]


def load_teacher(model_dir: str | Path) -> Any:
    """The model at `model_dir` in float32, in eval mode."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="float32").eval()


def teacher_logprobs(
    model: Any, prompt: list[int], completion: list[int], temperature: float = 1.0
) -> list[float]:
    """log p(completion[i] | prompt + completion[:i]) for each completion token, in one forward pass, under
    `log_softmax(logits / temperature)`: what a trainer recomputes for tokens sampled at `temperature`."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
    picked = torch.log_softmax(logits.float() / temperature, -1).gather(
        1, torch.tensor(completion).unsqueeze(1)
    )
    return picked.squeeze(1).tolist()
