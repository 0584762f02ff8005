"""Nanocoder 1.30.0 (`nanocoder --provider`) as an openenv environment; everything harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class NanocoderEnvironment(HarnessEnvironment):
    """Nanocoder 1.30.0 (`nanocoder --provider`) solving a coding task, one model turn per step."""

    harness = "nanocoder"
