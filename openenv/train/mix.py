"""Multi-harness mixes: which harness runs each GRPO group, drawn by weight.

Every episode of a group runs in the same harness, so GRPO compares like with like; the draw is
seeded by the step and the group's index, so a rerun of the same training run sees the same mix.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openenv.errors import BadRequest

__all__ = ["HarnessMix"]


class HarnessMix(BaseModel):
    """Harness weights, e.g. `HarnessMix(weights={"pi": 1, "claude-code": 1})` for an even mix.

    Weights need not sum to 1; a harness with weight 0 is never drawn.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, float] = Field(min_length=1)
    seed: int = 0

    @field_validator("weights")
    @classmethod
    def _positive_total(cls, weights: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError(f"harness weights must be >= 0 with a positive total; got {weights}")
        return weights

    @classmethod
    def of(cls, spec: str | Mapping[str, float] | HarnessMix) -> HarnessMix:
        """Build from `"pi"`, `"pi=2,claude-code=1"`, a dict, or a mix."""
        if isinstance(spec, HarnessMix):
            return spec
        if isinstance(spec, Mapping):
            return cls(weights=dict(spec))
        weights = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, _, weight = part.partition("=")
            try:
                weights[name.strip()] = float(weight) if weight else 1.0
            except ValueError:
                raise BadRequest(
                    f"bad harness weight in {spec!r}: expected name=number, got {part!r}"
                ) from None
        return cls(weights=weights)

    def draw(self, step: int, group: int) -> str:
        """The harness for group `group` of training step `step`."""
        rng = random.Random(f"{self.seed}:{step}:{group}")
        names = list(self.weights)
        return rng.choices(names, weights=[self.weights[n] for n in names])[0]
