"""The env server: any `Environment` served over stateful HTTP and WebSocket, one env per session."""

from __future__ import annotations

from openenv.server.app import create_app
from openenv.server.runner import LocalServer

__all__ = ["LocalServer", "create_app"]
