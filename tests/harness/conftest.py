"""Harness-test fixtures: one in-process capture server on the local backend, and a leftover-process check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.harness.sandbox.local import sandboxed_processes


@pytest.fixture(scope="session")
def capture_server(tiny_model: Path) -> Iterator[object]:
    """A real capture proxy on 127.0.0.1 whose backend is the tiny model in-process (scores and samples)."""
    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.server import CaptureServer

    server = CaptureServer(backend=LocalBackend(tiny_model), model=tiny_model).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def no_leftover_processes() -> Iterator[None]:
    """Fails the test if any sandboxed process is still alive when it ends."""
    yield
    leftovers = [f"{p.pid} {p.name()}" for p in sandboxed_processes()]
    assert leftovers == [], f"processes outlived their episode: {leftovers}"
