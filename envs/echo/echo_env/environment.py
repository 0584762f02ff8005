"""EchoEnvironment: rewards each message by its length; ends after `max_steps` if reset sets one."""

from __future__ import annotations

import uuid
from typing import Any

from echo_env.models import EchoAction, EchoObservation, EchoState
from openenv.core import Environment, EnvMetadata
from openenv.errors import BadRequest

__all__ = ["EchoEnvironment"]

REWARD_PER_CHAR = 0.1


class EchoEnvironment(Environment[EchoAction, EchoObservation, EchoState]):
    """Echoes each message back; reward is 0.1 per character."""

    action_type = EchoAction
    observation_type = EchoObservation
    state_type = EchoState
    blocking = False  # a few attribute writes per call: a worker-thread hop would cost more than the step

    def __init__(self) -> None:
        self._state = EchoState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        max_steps: int | None = None,
        **options: Any,
    ) -> EchoObservation:
        if options:
            raise BadRequest(f"echo accepts only the reset option max_steps, got {sorted(options)}")
        self._state = EchoState(episode_id=episode_id or uuid.uuid4().hex, max_steps=max_steps)
        return EchoObservation()

    def step(self, action: EchoAction) -> EchoObservation:
        self._state.step_count += 1
        limit = self._state.max_steps
        return EchoObservation(
            echoed_message=action.message,
            message_length=len(action.message),
            reward=REWARD_PER_CHAR * len(action.message),
            done=limit is not None and self._state.step_count >= limit,
        )

    @property
    def state(self) -> EchoState:
        return self._state.model_copy()

    @classmethod
    def metadata(cls) -> EnvMetadata:
        return EnvMetadata(
            name="echo", description="Echoes each message back with its length.", version="0.1.0"
        )
