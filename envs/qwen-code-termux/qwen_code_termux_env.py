"""Qwen Code Termux 0.6.402 (a Qwen Code fork, `qwen -p`, yolo) as an openenv environment; everything
harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class QwenCodeTermuxEnvironment(HarnessEnvironment):
    """Qwen Code Termux 0.6.402 (`qwen -p`, yolo) solving a coding task, one model turn per step."""

    harness = "qwen-code-termux"
