"""Capture fixtures: in-process proxies over real backends, and the raw vLLM replies they got.

`proxy` serves the real app on a loopback port with a `VLLMBackend` pointed at the session's real
vLLM server; `replies` keeps every raw vLLM reply (the backend's `on_reply`) so tests can compare what
vLLM sampled with what the proxy recorded. `local_proxy` does the same over the in-process `LocalBackend`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from openenv.capture.backends import LocalBackend, VLLMBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer


@pytest.fixture()
def replies() -> list[dict[str, Any]]:
    """Every `/v1/completions` reply the `proxy` fixture's backend decoded, in order."""
    return []


@pytest.fixture()
def proxy(vllm_url: str, renderer: Renderer, replies: list[dict[str, Any]]) -> Iterator[CaptureServer]:
    """A started proxy over the real vLLM server (one per test: cheap, and sessions stay apart)."""
    backend = VLLMBackend(vllm_url, on_reply=replies.append)
    with CaptureServer(backend=backend, renderer=renderer) as server:
        yield server


@pytest.fixture()
def local_proxy(renderer: Renderer, local_backend: LocalBackend) -> Iterator[CaptureServer]:
    with CaptureServer(backend=local_backend, renderer=renderer) as server:
        yield server


@pytest.fixture(params=["vllm", "local"])
def any_proxy(request: pytest.FixtureRequest) -> CaptureServer:
    """The same structural test over both backends."""
    return request.getfixturevalue("proxy" if request.param == "vllm" else "local_proxy")
