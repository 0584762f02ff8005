"""Env server fixtures: real uvicorn servers on free 127.0.0.1 ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from echo_env import EchoEnvironment
from openenv.core.auth import auth_headers
from openenv.server import LocalServer, create_app

Serve = Callable[..., str]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """`serve(factory=EchoEnvironment, **create_app_kwargs)` -> base URL of a live server."""
    servers: list[LocalServer] = []

    def _serve(factory: Any = EchoEnvironment, **kwargs: Any) -> str:
        server = LocalServer(create_app(factory, **kwargs)).start()
        servers.append(server)
        return server.base_url

    yield _serve
    for server in servers:
        server.stop()


@pytest.fixture
def echo_url(serve: Serve) -> str:
    return serve()


def _add_token(request: httpx.Request) -> None:
    """Send the token of the server a test started (servers require one by default); a test that sets
    its own `Authorization` keeps it."""
    if "authorization" not in request.headers:
        request.headers.update(auth_headers(str(request.url)))


@pytest.fixture(scope="session")
def http() -> Iterator[httpx.Client]:
    """One pooled HTTP client for the whole run (a fresh client per call costs ~50 ms of TLS setup),
    sending the token of whichever in-process server it talks to."""
    with httpx.Client(timeout=10.0, event_hooks={"request": [_add_token]}) as client:
        yield client
