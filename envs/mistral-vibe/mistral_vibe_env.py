"""Mistral Vibe 3.0.2 (`vibe -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class MistralVibeEnvironment(HarnessEnvironment):
    """Mistral Vibe 3.0.2 (`vibe -p`) solving a coding task, one model turn per step."""

    harness = "mistral-vibe"
