"""The environment protocol: typed Action/Observation/State models and the Environment base class."""

from __future__ import annotations

from openenv.core.environment import Environment, EnvMetadata
from openenv.core.types import Action, Observation, State

__all__ = ["Action", "EnvMetadata", "Environment", "Observation", "State"]
