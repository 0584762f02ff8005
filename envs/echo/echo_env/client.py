"""EchoClient: `EnvClient` typed by the echo models."""

from __future__ import annotations

from echo_env.models import EchoAction, EchoObservation, EchoState
from openenv.client import EnvClient

__all__ = ["EchoClient"]


class EchoClient(EnvClient[EchoAction, EchoObservation, EchoState]):
    """Async client for the echo env; `.sync()` gives the blocking twin."""
