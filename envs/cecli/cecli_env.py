"""cecli 1.10.0 (`cecli --message`, SEARCH/REPLACE edit blocks) as an openenv environment; everything
harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class CecliEnvironment(HarnessEnvironment):
    """cecli 1.10.0 (`cecli --message`) solving a coding task through edit blocks, one model turn per step."""

    harness = "cecli"
