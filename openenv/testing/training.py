"""`train_and_compare`: run a trainer and say whether its weights moved, for the tests (and the Ray driver)
that show a real GRPO step trains the model. torch is imported only when called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["train_and_compare"]


def train_and_compare(trainer: Any, close: Callable[[], None]) -> bool:
    """`trainer.train()`, then `close()` (the rollout's episodes and servers) however training ended;
    whether any tensor of `trainer.model`'s state changed."""
    import torch

    before = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    try:
        trainer.train()
    finally:
        close()
    after = trainer.model.state_dict()
    return any(not torch.equal(before[k], after[k]) for k in before)
