"""Grok CLI 0.0.34 (`grok -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class GrokCliEnvironment(HarnessEnvironment):
    """Grok CLI 0.0.34 (`grok -p`) solving a coding task, one model turn per step."""

    harness = "grok-cli"
