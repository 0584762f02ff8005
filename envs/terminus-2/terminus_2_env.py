"""Terminus-2 (Harbor 0.26.0) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class Terminus2Environment(HarnessEnvironment):
    """Terminus-2 (Harbor 0.26.0) solving a coding task, one model turn per step."""

    harness = "terminus-2"
