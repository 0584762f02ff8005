"""`Server-Timing` on every whole model reply: the wait for the request's body, the engine's time, the
controller's (a gated session's wait for its `step`) and the proxy's own, which add up to what the client
waited.

The engine is the tiny model in-process behind a wrapper that first sleeps a known time, so the split is
checked against a wait we chose, through the real app on 127.0.0.1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from openenv.capture.backends.base import Generation
from openenv.capture.backends.local import LocalBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer

ENGINE_S, POLICY_S, UPLOAD_S = 0.3, 0.4, 0.3
BODY = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class SlowEngine:
    """The real backend, each generate starting with a sleep of ENGINE_S."""

    def __init__(self, inner: LocalBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        import asyncio

        await asyncio.sleep(ENGINE_S)
        return await self.inner.generate(prompt_ids, params)


@pytest.fixture
def proxy(local_backend: LocalBackend, renderer: Renderer) -> Iterator[CaptureServer]:
    server = CaptureServer(backend=SlowEngine(local_backend), renderer=renderer).start()  # type: ignore[arg-type]
    yield server
    server.stop()


def _timing(reply: httpx.Response) -> dict[str, float]:
    parts = (part.strip().split(";dur=") for part in reply.headers["server-timing"].split(","))
    return {name: float(ms) / 1e3 for name, ms in parts}


def _post(url: str) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    reply = httpx.post(url + "/v1/chat/completions", json=BODY, timeout=60)
    return reply, time.perf_counter() - start


def test_an_auto_turn_splits_its_time_between_the_engine_and_the_proxy(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="auto")
    reply, waited = _post(session.base_url)
    assert reply.status_code == 200, reply.text
    timing = _timing(reply)
    assert set(timing) == {"body", "engine", "policy", "proxy"}
    assert timing["engine"] >= ENGINE_S and timing["policy"] == 0.0
    assert sum(timing.values()) <= waited, "the parts are the handler's, inside what the client waited"
    assert timing["proxy"] < timing["engine"], timing


def test_a_slow_upload_is_the_bodys_time_not_the_proxys(proxy: CaptureServer) -> None:
    """The handler starts once the headers are in; a client still sending its body (or a loaded client
    loop sending it late) is not time the proxy spent."""
    import json

    session = proxy.open_session(mode="auto")
    raw = json.dumps(BODY).encode()

    def upload() -> Iterator[bytes]:
        yield raw[:10]
        time.sleep(UPLOAD_S)
        yield raw[10:]

    reply = httpx.post(session.base_url + "/v1/chat/completions", content=upload(), timeout=60)
    assert reply.status_code == 200, reply.text
    timing = _timing(reply)
    assert timing["body"] >= UPLOAD_S and timing["engine"] >= ENGINE_S, timing
    assert timing["proxy"] < UPLOAD_S, timing


def test_a_gated_turn_counts_the_controllers_wait_as_policy(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated")

    def controller() -> None:
        pending = session.next_pending(timeout=30)
        assert pending is not None
        time.sleep(POLICY_S)
        pending.sample(timeout=30)

    thread = threading.Thread(target=controller)
    thread.start()
    reply, waited = _post(session.base_url)
    thread.join()
    assert reply.status_code == 200, reply.text
    timing = _timing(reply)
    assert timing["policy"] >= POLICY_S and timing["engine"] >= ENGINE_S, timing
    assert sum(timing.values()) <= waited


def test_a_streamed_reply_carries_no_timing(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="auto")
    with httpx.stream(
        "POST", session.base_url + "/v1/chat/completions", json={**BODY, "stream": True}, timeout=60
    ) as reply:
        reply.read()
    assert reply.status_code == 200 and "server-timing" not in reply.headers
