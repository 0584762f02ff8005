"""GitHub Copilot CLI 1.0.102 (`copilot -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class CopilotEnvironment(HarnessEnvironment):
    """GitHub Copilot CLI 1.0.102 (`copilot -p`) solving a coding task, one model turn per step."""

    harness = "copilot"
