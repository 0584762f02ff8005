"""The three models every environment speaks: what the agent does, what it sees, and where it is.

Our own API is strict (`extra="forbid"`): a misspelt action field is a validation error that names the
field, not a silently ignored key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Action", "Observation", "State"]

_STRICT = ConfigDict(extra="forbid")


class Action(BaseModel):
    """Base of every env's action model; subclasses add the fields the agent sets."""

    model_config = _STRICT


class Observation(BaseModel):
    """What the agent sees after reset or step. Subclasses add fields; these three are always there."""

    model_config = _STRICT

    done: bool = Field(
        default=False, description="True once the episode has ended; reset before stepping again."
    )
    reward: float | None = Field(
        default=None, description="Reward for the step that produced this observation."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form diagnostics, never scored.")


class State(BaseModel):
    """Where an episode is: its id and how many steps it has taken. Subclasses add env-specific fields."""

    model_config = _STRICT

    episode_id: str | None = Field(default=None, description="Id of the current episode; None before reset.")
    step_count: int = Field(default=0, ge=0, description="Steps taken since the last reset.")
