"""OpenHands CLI 1.16.0 (`openhands --headless`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class OpenhandsEnvironment(HarnessEnvironment):
    """OpenHands CLI 1.16.0 (`openhands --headless`) solving a coding task, one model turn per step."""

    harness = "openhands"
