"""mini-swe-agent 2.4.6 (`mini -y`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class MiniSweAgentEnvironment(HarnessEnvironment):
    """mini-swe-agent 2.4.6 (`mini -y`) solving a coding task, one model turn per step."""

    harness = "mini-swe-agent"
