"""Capture fixtures: the tiny model's renderer, in-process proxies over real backends, a recorder.

`proxy` serves the real app on a loopback port with a `VLLMBackend` pointed at the session's real
vLLM server; its httpx transport records every raw vLLM reply so tests can compare what vLLM sampled
with what the proxy recorded. `local_proxy` does the same over the in-process `LocalBackend`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.capture.backends import LocalBackend, VLLMBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer


class RecordingTransport(httpx.AsyncHTTPTransport):
    """A real network transport that keeps each JSON reply from the backend."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        body = await response.aread()
        if response.status_code == 200 and request.url.path.endswith("/completions"):
            self.replies.append(json.loads(body))
        return httpx.Response(response.status_code, headers=response.headers, content=body, request=request)


@pytest.fixture(scope="session")
def renderer(tiny_model: Path) -> Renderer:
    return Renderer.from_pretrained(tiny_model)


@pytest.fixture(scope="session")
def local_backend(tiny_model: Path) -> LocalBackend:
    return LocalBackend(tiny_model)


@pytest.fixture()
def recorder() -> RecordingTransport:
    return RecordingTransport()


@pytest.fixture()
def proxy(vllm_url: str, renderer: Renderer, recorder: RecordingTransport) -> Iterator[CaptureServer]:
    """A started proxy over the real vLLM server (one per test: cheap, and sessions stay apart)."""
    backend = VLLMBackend(vllm_url, transport=recorder)
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
