"""Kimi CLI 1.51.0 (`kimi --print`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class KimiCliEnvironment(HarnessEnvironment):
    """Kimi CLI 1.51.0 (`kimi --print`) solving a coding task, one model turn per step."""

    harness = "kimi-cli"
