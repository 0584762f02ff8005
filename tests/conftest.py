"""Session-wide fixtures: one tiny-model build and one real vLLM CPU server per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.testing.tiny_model import tiny_model_path


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """Path to the deterministic tiny chat model (built once, cached under .cache/)."""
    return tiny_model_path()


@pytest.fixture(scope="session")
def vllm_url(tiny_model: Path) -> Iterator[str]:
    """Base URL (no /v1) of a real vLLM CPU server serving the tiny model as `tiny`.

    `OPENENV_VLLM_URL` reuses a server that is already running (handy while developing).
    """
    existing = os.environ.get("OPENENV_VLLM_URL")
    if existing:
        yield existing.rstrip("/")
        return
    from openenv.testing.vllm_server import VLLMServer

    server = VLLMServer(tiny_model).start()
    try:
        yield server.base_url
    finally:
        server.stop()
