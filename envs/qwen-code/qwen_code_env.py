"""Qwen Code 0.24.4 (`qwen -p`, yolo) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class QwenCodeEnvironment(HarnessEnvironment):
    """Qwen Code 0.24.4 (`qwen -p`, yolo) solving a coding task, one model turn per step."""

    harness = "qwen-code"
