"""gptme 0.35.1 (`gptme --non-interactive`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class GptmeEnvironment(HarnessEnvironment):
    """gptme 0.35.1 (`gptme --non-interactive`) solving a coding task, one model turn per step."""

    harness = "gptme"
