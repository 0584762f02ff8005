"""Small socket helpers every layer's servers and tests share."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now (it may be taken again before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
