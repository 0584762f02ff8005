"""Capture fixtures: in-process proxies over real backends, and the raw vLLM replies they got.

`proxy` serves the real app on a loopback port with a `VLLMBackend` pointed at the session's real
vLLM server; `replies` keeps every raw vLLM reply (the backend's `on_reply`) so tests can compare what
vLLM sampled with what the proxy recorded. `local_proxy` does the same over the in-process `LocalBackend`.
`raw_vllm_url` is the package's one other vLLM server (its logprobs raw), stopped after the last capture test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.capture.backends import LocalBackend, VLLMBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.soak.vllm_server import VLLMServer


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


# The raw server, launched when collection ends (`pytest_collection_finish`) if a collected test needs it:
# it loads while the tests before this package run (vLLM's start keeps one core busy and the other free).
_LAUNCHED: dict[str, VLLMServer] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    if (
        session.config.option.collectonly
        or os.environ.get("OPENENV_VLLM_RAW_URL")
        or not any("raw_vllm_url" in getattr(item, "fixturenames", ()) for item in session.items)
    ):
        return
    from openenv.models import tiny_model_path

    _LAUNCHED["raw"] = VLLMServer(tiny_model_path(), logprobs_mode="raw_logprobs").launch()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A launched server no test got to use (a run stopped early) is stopped with the session."""
    for server in _LAUNCHED.values():
        server.stop()


@pytest.fixture(scope="package")
def raw_vllm_url(tiny_model: Path) -> Iterator[str]:
    """A second real vLLM on the tiny model, started with `--logprobs-mode raw_logprobs` explicitly (vLLM's
    own default): the engine a training run must refuse (test_logprob_mode.py), and the second engine of the
    multi-engine tests (backends/test_vllm_engines.py), which route by load and never by logprob mode and
    sample greedily, where vLLM's raw and processed logprobs are the same `log_softmax(logits)`.

    One for the whole capture package (each vLLM start is ~30 s, ~60 s on a loaded CI machine, and ~1.8 GB),
    launched when collection ends and stopped after the package's last test (this folder is a package for
    that). `OPENENV_VLLM_RAW_URL` reuses one already running.
    """
    existing = os.environ.get("OPENENV_VLLM_RAW_URL")
    if existing:
        yield existing.rstrip("/")
        return
    server = _LAUNCHED.pop("raw", None) or VLLMServer(tiny_model, logprobs_mode="raw_logprobs").launch()
    try:
        yield server.wait_ready().base_url
    finally:
        server.stop()
