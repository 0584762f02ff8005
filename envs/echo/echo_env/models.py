"""Wire models of the echo env."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from openenv.core import Action, Observation, State

__all__ = ["EchoAction", "EchoObservation", "EchoState"]


class EchoAction(Action):
    """Say something; the env says it back."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"message": "hello"}]})

    message: str = Field(description="Text to echo back.")


class EchoObservation(Observation):
    echoed_message: str = Field(default="", description="The last message, verbatim.")
    message_length: int = Field(default=0, ge=0, description="Length of the last message in characters.")


class EchoState(State):
    max_steps: int | None = Field(
        default=None, description="Episode length limit set at reset; None: unlimited."
    )
