"""A proxy whose sessions have all closed gives back what they left behind.

Measured in docs/benchmarks.md section 11: after 1,000 sessions closed, the proxy kept 2.36x its starting
RSS, because the shared caches (dialect memos, rendered suffixes, learnt words) still held what the closed
sessions sent, closed sessions sat in reference cycles until a full collection, and glibc kept the freed
pages. Python-level bytes are what these tests count (tracemalloc: deterministic, unlike RSS); the heap
trim has its own test in tests/core/test_heap.py.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from openenv.capture.backends import VLLMBackend
from openenv.capture.backends.engine_http import _Connection
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.session import CaptureSession

SESSIONS = 8
TURNS = 2
WORDS = 1000  # fresh words per turn: ~6 KB of text no other session sends


def _fresh(rng: random.Random) -> str:
    return " ".join(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(WORDS)
    )


def _play(url: str, seed: int) -> None:
    """One tool-loop-like conversation: every turn resends the history plus fresh text."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    with httpx.Client(timeout=120) as http:
        for _ in range(TURNS):
            messages.append({"role": "user", "content": _fresh(rng)})
            reply = http.post(url + "/v1/chat/completions", json={"model": "tiny", "messages": messages})
            assert reply.status_code == 200, reply.text
            messages.append(
                {"role": "assistant", "content": reply.json()["choices"][0]["message"]["content"]}
            )


def _round(server: CaptureServer, seed: int, n: int) -> None:
    """`n` sessions open at once, each plays its own conversation, then all close."""
    sessions = [server.open_session(mode="auto", sampling=SamplingParams(max_tokens=2)) for _ in range(n)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(_play, [s.base_url for s in sessions], range(seed, seed + n)))
    for s in sessions:
        server.close_session(s.session.token)


def _wait_releases(server: CaptureServer, count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while server.registry.releases < count:
        assert time.monotonic() < deadline, "the registry never released after its last session closed"
        time.sleep(0.05)


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_python_memory_returns_to_its_start_once_the_last_session_closes(
    vllm_url: str, renderer: Renderer
) -> None:
    with CaptureServer(backend=VLLMBackend(vllm_url), renderer=renderer, release_idle_s=0.2) as server:
        _round(server, 0, 2)  # warm-up: lazy imports, pools, the dialect's parsers
        _wait_releases(server, 1)
        tracemalloc.start()
        try:
            start = _traced()
            _round(server, 100, SESSIONS)
            _wait_releases(server, 2)
            after = _traced()
        finally:
            tracemalloc.stop()
        alive = [o for o in gc.get_objects() if type(o) is CaptureSession]
        pooled = [o for o in gc.get_objects() if type(o) is _Connection]
    # Without the release the caches alone keep several MB of what these 8 sessions sent.
    assert after - start < 1 << 20, f"{(after - start) / 2**20:.1f} MiB of Python memory kept"
    assert alive == []
    # The engine connections of the peak are closed and gone (they kept allocator arenas mapped).
    assert pooled == []


def test_a_session_opened_before_the_wait_ends_keeps_the_caches(vllm_url: str, renderer: Renderer) -> None:
    """Back-to-back episodes (one closes, the next opens within `release_idle_s`) pay for no release."""
    with CaptureServer(backend=VLLMBackend(vllm_url), renderer=renderer, release_idle_s=2.0) as server:
        first = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=2))
        server.close_session(first.session.token)
        second = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=2))
        time.sleep(2.5)
        assert server.registry.releases == 0
        server.close_session(second.session.token)
        _wait_releases(server, 1)
