"""Clients for env servers: the async `EnvClient` over WebSocket and its blocking twin `SyncEnvClient`."""

from __future__ import annotations

from openenv.client.env_client import AnyAction, AnyObservation, AnyState, EnvClient, SyncEnvClient

__all__ = ["AnyAction", "AnyObservation", "AnyState", "EnvClient", "SyncEnvClient"]
