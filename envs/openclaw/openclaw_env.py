"""OpenClaw 2026.9.6 (`openclaw agent exec`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class OpenclawEnvironment(HarnessEnvironment):
    """OpenClaw 2026.9.6 (`openclaw agent exec`) solving a coding task, one model turn per step."""

    harness = "openclaw"
