"""Claude Code 2.1.332 in `--bare` mode as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class ClaudeCodeEnvironment(HarnessEnvironment):
    """Claude Code 2.1.332 in `--bare` mode solving a coding task, one model turn per step."""

    harness = "claude-code"
