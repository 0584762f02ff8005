"""OpenAI Codex CLI 0.171.0 (`codex exec`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class CodexEnvironment(HarnessEnvironment):
    """OpenAI Codex CLI 0.171.0 (`codex exec`) solving a coding task, one model turn per step."""

    harness = "codex"
