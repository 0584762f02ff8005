"""Gemini CLI 0.61.0 (`gemini -p`, yolo) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class GeminiCliEnvironment(HarnessEnvironment):
    """Gemini CLI 0.61.0 (`gemini -p`, yolo) solving a coding task, one model turn per step."""

    harness = "gemini-cli"
