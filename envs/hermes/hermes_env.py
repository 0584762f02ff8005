"""Hermes agent 0.19.0 (`hermes -z`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class HermesEnvironment(HarnessEnvironment):
    """Hermes agent 0.19.0 (`hermes -z`) solving a coding task, one model turn per step."""

    harness = "hermes"
