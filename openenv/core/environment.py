"""The Environment base class: the Gym-style contract every openenv environment implements.

Write `reset`, `step` and `state` synchronously for a simple env; the async variants then run them in a
worker thread so a server's event loop never blocks. An env whose work is naturally async (network,
subprocesses) overrides `reset_async`/`step_async` instead, and the server calls those directly. An env
whose sync methods are pure and quick sets `blocking = False` and is called inline.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from openenv.core.types import Action, Observation, State

__all__ = ["EnvMetadata", "Environment"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class EnvMetadata(BaseModel):
    """What `/metadata` reports about an environment."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    version: str = "0.0.0"


class Environment(ABC, Generic[ActT, ObsT, StateT]):
    """One episode at a time, driven by `reset` then `step` until `done`.

    A server builds one instance per session, so instances need not be thread-safe, but they must not
    share mutable state with each other.
    """

    # Set these in ALL subclasses: the server validates and documents the wire with them.
    action_type: ClassVar[type[Action]] = Action
    observation_type: ClassVar[type[Observation]] = Observation
    state_type: ClassVar[type[State]] = State
    # Set False when the sync methods never block (pure computation, microseconds): callers then run
    # them inline on the event loop instead of paying a worker-thread hop per call.
    blocking: ClassVar[bool] = True
    # Set False for an env whose steps need no episode begun first (a tool server whose every step is a
    # whole call, as the Harbor env road's `run_rollout`): the server then takes a step before any reset.
    requires_reset: ClassVar[bool] = True

    @abstractmethod
    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> ObsT:
        """Start a new episode.

        Args:
            seed: Seed for any randomness, so that equal seeds give equal episodes.
            episode_id: Id to give the episode; the env makes one up when None.
            **options: Env-specific reset options (a task id, a difficulty, ...).

        Returns:
            The first observation, with `done=False`.
        """

    @abstractmethod
    def step(self, action: ActT) -> ObsT:
        """Apply one action.

        Args:
            action: An instance of `action_type`, already validated.

        Returns:
            The next observation, carrying the step's `reward` and `done`.
        """

    @property
    @abstractmethod
    def state(self) -> StateT:
        """The episode's current state (id, step count and env-specific fields)."""

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ) -> ObsT:
        """Async `reset`; by default runs the sync one in a worker thread (inline if not `blocking`)."""
        if not self.blocking:
            return self.reset(seed, episode_id, **options)
        return await asyncio.to_thread(self.reset, seed, episode_id, **options)

    async def step_async(self, action: ActT) -> ObsT:
        """Async `step`; by default runs the sync one in a worker thread (inline if not `blocking`)."""
        if not self.blocking:
            return self.step(action)
        return await asyncio.to_thread(self.step, action)

    @classmethod
    def check_wire_reset(cls, options: dict[str, Any], *, allow_inline_tasks: bool) -> None:
        """Refuse `reset` options a network client may not set; the env server calls it before `reset`.

        A client of the server is not trusted (docs/security.md). The default accepts any option; an env
        whose options can carry code or host paths (the harness env's inline `Task`, whose test command
        runs in the sandbox) refuses them here unless the server was started with `allow_inline_tasks`.

        Raises:
            BadRequest: an option the client may not set, named with what to send instead.
        """

    def close(self) -> None:
        """Release what the env holds (processes, sandboxes, files). Called once per instance."""

    @classmethod
    def metadata(cls) -> EnvMetadata:
        """Name, description and version for `/metadata`; override to say more."""
        doc = (cls.__doc__ or "").strip().splitlines()
        return EnvMetadata(name=cls.__name__, description=doc[0] if doc else "")
