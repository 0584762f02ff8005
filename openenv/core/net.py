"""Small socket helpers every layer's servers and tests share: a free port, and waiting for `/health`."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx

from openenv.errors import TransportError

__all__ = ["free_port", "wait_for_health"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now (it may be taken again before you bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_health(
    url: str,
    *,
    timeout_s: float,
    gone: Callable[[], str | None] | None = None,
    interval_s: float = 0.2,
    path: str = "/health",
) -> None:
    """Poll `GET url/health` (or `url` + `path`) until it answers 200.

    Args:
        url: the server's base URL.
        path: the route that answers 200 once the server is up (a server with no `/health`).
        timeout_s: how long to wait in all.
        gone: says why the server can no longer come up (its process or container ended), else None;
            checked between polls, so a dead server fails the wait at once instead of at the deadline.
        interval_s: the pause between polls.

    Raises:
        TransportError: no 200 within `timeout_s`, or `gone` gave a reason.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}{path}", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if gone is not None and (reason := gone()) is not None:
            raise TransportError(f"{url} will not answer {path}: {reason}")
        if time.monotonic() > deadline:
            raise TransportError(f"{url}{path} did not answer 200 within {timeout_s:g} s")
        time.sleep(interval_s)
