"""aider 0.86.2 (`aider --message`, SEARCH/REPLACE edit blocks) as an openenv environment; everything
harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class AiderEnvironment(HarnessEnvironment):
    """aider 0.86.2 (`aider --message`) solving a coding task through edit blocks, one model turn per step."""

    harness = "aider"
