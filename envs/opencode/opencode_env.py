"""OpenCode 1.18.33 (`opencode run`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class OpencodeEnvironment(HarnessEnvironment):
    """OpenCode 1.18.33 (`opencode run`) solving a coding task, one model turn per step."""

    harness = "opencode"
