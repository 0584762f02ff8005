"""The echo environment: the smallest complete openenv env (models, environment, typed client)."""

from __future__ import annotations

from echo_env.client import EchoClient
from echo_env.environment import EchoEnvironment
from echo_env.models import EchoAction, EchoObservation, EchoState

__all__ = ["EchoAction", "EchoClient", "EchoEnvironment", "EchoObservation", "EchoState"]
