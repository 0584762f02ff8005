"""Harness-test fixtures: a leftover-process check (the capture server is the suite-wide `capture_server`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv.harness.sandbox.local import sandboxed_processes


@pytest.fixture
def no_leftover_processes() -> Iterator[None]:
    """Fails the test if any sandboxed process is still alive when it ends."""
    yield
    leftovers = [f"{p.pid} {p.name()}" for p in sandboxed_processes()]
    assert leftovers == [], f"processes outlived their episode: {leftovers}"
