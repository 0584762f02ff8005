"""Kilo Code CLI 7.7.7 (`kilo run`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class KiloEnvironment(HarnessEnvironment):
    """Kilo Code CLI 7.7.7 (`kilo run`) solving a coding task, one model turn per step."""

    harness = "kilo"
