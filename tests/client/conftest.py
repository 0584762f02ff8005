"""Client fixtures: a real echo server on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echo_env import EchoEnvironment
from openenv.server import LocalServer, create_app


@pytest.fixture
def echo_url() -> Iterator[str]:
    with LocalServer(create_app(EchoEnvironment, max_sessions=2)) as server:
        yield server.base_url
