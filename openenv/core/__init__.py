"""The lowest layer: the environment protocol and the small helpers every other layer shares.

The protocol is the typed Action/Observation/State models and the Environment base class (re-exported
here). The helpers sit in their own modules, written once: `validation` (a pydantic error as one line),
`loop_thread` (an event loop or uvicorn servers on a background thread), `net` (`free_port`,
`wait_for_health`), `http_errors` (the Starlette error handlers every app installs).
"""

from __future__ import annotations

from openenv.core.environment import Environment, EnvMetadata
from openenv.core.types import Action, Observation, State

__all__ = ["Action", "EnvMetadata", "Environment", "Observation", "State"]
