"""Pi coding agent 0.73.1 (`pi -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class PiEnvironment(HarnessEnvironment):
    """Pi coding agent 0.73.1 (`pi -p`) solving a coding task, one model turn per step."""

    harness = "pi"
