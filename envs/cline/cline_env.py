"""Cline CLI 3.0.65 (`cline --json`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class ClineEnvironment(HarnessEnvironment):
    """Cline CLI 3.0.65 (`cline --json`) solving a coding task, one model turn per step."""

    harness = "cline"
