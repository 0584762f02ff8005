"""CodeBuddy Code 2.163.0 (`codebuddy -p`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class CodebuddyEnvironment(HarnessEnvironment):
    """CodeBuddy Code 2.163.0 (`codebuddy -p`) solving a coding task, one model turn per step."""

    harness = "codebuddy"
