"""Continue CLI 1.5.47 (`cn -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class ContinueEnvironment(HarnessEnvironment):
    """Continue CLI 1.5.47 (`cn -p`) solving a coding task, one model turn per step."""

    harness = "continue"
