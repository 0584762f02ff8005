"""`VLLMBackend` against the real vLLM server, and its error translation against real sockets.

Failures come from a `FaultProxy` in front of the real server (reset, slow, 5xx) and from a loopback
aiohttp server that answers one canned reply (a 400, a reply without token ids): no transport is mocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.core.net import free_port
from openenv.errors import BackendUnavailable, BadRequest
from openenv.soak.faults import FaultProxy


def prompt(renderer: Renderer) -> list[int]:
    from openenv.capture.canonical import Message, TextPart

    return renderer.full_prompt((Message(role="user", parts=(TextPart(text="hello"),)),), ())[1]


async def test_generate_then_score_gives_the_same_logprobs(vllm_url: str, renderer: Renderer) -> None:
    backend = VLLMBackend(vllm_url)
    try:
        ids = prompt(renderer)
        gen = await backend.generate(ids, SamplingParams(max_tokens=8, temperature=1.0))
        assert len(gen.token_ids) == len(gen.logprobs) == 8 and gen.finish_reason == "length"
        scored = await backend.score(ids, gen.token_ids)
        assert max(abs(a - b) for a, b in zip(scored, gen.logprobs)) < 1e-4
    finally:
        await backend.aclose()


async def test_greedy_generation_is_deterministic(vllm_url: str, renderer: Renderer) -> None:
    backend = VLLMBackend(vllm_url)
    try:
        params = SamplingParams(max_tokens=6, temperature=0.0)
        a = await backend.generate(prompt(renderer), params)
        b = await backend.generate(prompt(renderer), params)
        assert a.token_ids == b.token_ids
    finally:
        await backend.aclose()


def test_discovers_the_served_model_and_context(vllm_url: str) -> None:
    backend = VLLMBackend(vllm_url)
    assert backend.model == "tiny" and backend.context_window >= 4096


async def test_discovery_does_not_block_and_concurrent_first_turns_share_one_lookup(vllm_url: str) -> None:
    backend = VLLMBackend(vllm_url)
    lookups = 0
    real = backend._discover

    async def counted() -> None:
        nonlocal lookups
        lookups += 1
        await real()

    backend._discover = counted  # type: ignore[method-assign]
    try:
        await asyncio.gather(*(backend.ready() for _ in range(5)))
        assert lookups == 1 and backend.model == "tiny" and backend.context_window >= 4096
    finally:
        await backend.aclose()


async def test_a_failed_discovery_is_retried_by_the_next_turn() -> None:
    backend = VLLMBackend(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BackendUnavailable, match="unreachable"):
        await backend.generate([1], SamplingParams())
    assert backend._discovery is None  # not cached: the next turn looks again
    await backend.aclose()


@pytest.fixture
def faults(vllm_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(vllm_url) as proxy:
        yield proxy


@pytest_asyncio.fixture(loop_scope="function")  # the test's own loop, where the backend's client lives
async def make() -> AsyncIterator[Any]:
    """`make(url, timeout=...)`: a backend with a known model and window, closed after the test."""
    made: list[VLLMBackend] = []

    def build(url: str, timeout: float = 30.0, **kwargs: Any) -> VLLMBackend:
        made.append(VLLMBackend(url, timeout=timeout, **{"model": "tiny", "context_window": 100, **kwargs}))
        return made[-1]

    yield build
    for backend in made:
        await backend.aclose()


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_become_backend_unavailable(faults: FaultProxy, status: int, make: Any) -> None:
    faults.set("error", status=status)
    with pytest.raises(BackendUnavailable, match=f"answered {status}: fault injected") as caught:
        await make(faults.url).generate([1, 2], SamplingParams(max_tokens=2))
    assert caught.value.details["status"] == status


async def test_a_reset_connection_is_backend_unavailable(faults: FaultProxy, make: Any) -> None:
    faults.set("down")
    with pytest.raises(BackendUnavailable, match="unreachable"):
        await make(faults.url).generate([1, 2], SamplingParams(max_tokens=2))


async def test_a_backend_silent_past_the_timeout_is_a_read_timeout(faults: FaultProxy, make: Any) -> None:
    faults.set("slow", delay_s=5.0)
    with pytest.raises(BackendUnavailable, match="unreachable: ReadTimeout"):
        await make(faults.url, timeout=0.5).generate([1, 2], SamplingParams(max_tokens=2))


async def test_a_refused_connection_is_backend_unavailable(make: Any) -> None:
    with pytest.raises(BackendUnavailable, match="unreachable"):
        await make(f"http://127.0.0.1:{free_port()}").score([1], [2])


async def test_the_backend_recovers_once_the_fault_clears(faults: FaultProxy, renderer: Renderer) -> None:
    faults.set("down", count=1)
    seen: list[dict[str, Any]] = []
    backend = VLLMBackend(faults.url, model="tiny", context_window=4096, on_reply=seen.append)
    try:
        with pytest.raises(BackendUnavailable):
            await backend.generate(prompt(renderer), SamplingParams(max_tokens=2))
        gen = await backend.generate(prompt(renderer), SamplingParams(max_tokens=2))
        assert len(gen.token_ids) == 2 and [r["choices"][0]["token_ids"] for r in seen] == [gen.token_ids]
    finally:
        await backend.aclose()


@pytest_asyncio.fixture(loop_scope="function")  # served on the test's loop while the test awaits
async def canned() -> AsyncIterator[Any]:
    """A loopback server answering every request with the reply last given to `canned(status, body)`."""
    reply: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(reply["body"], status=reply["status"])

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()

    def answer(status: int, body: Any) -> str:
        reply.update(status=status, body=body)
        return f"http://127.0.0.1:{port}"

    yield answer
    await runner.cleanup()


async def test_a_rejected_request_is_a_bad_request(canned: Any, make: Any) -> None:
    backend = make(canned(400, {"message": "too long"}))
    with pytest.raises(BadRequest, match="too long"):
        await backend.score([1], [2])


async def test_a_reply_without_token_ids_is_backend_unavailable(canned: Any, make: Any) -> None:
    backend = make(canned(200, {"choices": [{"text": "hi", "finish_reason": "stop"}]}))
    with pytest.raises(BackendUnavailable, match="token_ids"):
        await backend.generate([1], SamplingParams())


async def test_a_reply_that_is_not_a_json_object_is_backend_unavailable(canned: Any, make: Any) -> None:
    backend = make(canned(200, ["not", "an", "object"]))
    with pytest.raises(BackendUnavailable, match="not a JSON object"):
        await backend.generate([1], SamplingParams())


async def test_a_models_card_without_the_served_name_is_backend_unavailable(canned: Any, make: Any) -> None:
    backend = make(canned(200, {"data": []}), model=None, context_window=None)
    with pytest.raises(BackendUnavailable, match="IndexError"):
        await backend.generate([1], SamplingParams())


def _score_reply(rows: list[Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": "", "token_ids": [], "prompt_logprobs": rows}]}


async def test_score_reads_the_completion_rows_of_a_reply_as_vllm_writes_it(canned: Any, make: Any) -> None:
    # vLLM writes a row per prompt position (None first), with rank and decoded_token besides the logprob.
    rows = [None] + [
        {str(t): {"logprob": -0.5, "rank": 3, "decoded_token": "x"}, "99": {"logprob": -0.1, "rank": 1}}
        for t in (11, 12)
    ]
    rows += [{"21": {"logprob": -1.25, "rank": 2, "decoded_token": "a"}}, {"22": {"logprob": -0.0}}]
    for track in (False, True):  # decoded lazily, or whole for a caller that keeps every reply
        seen: list[dict[str, Any]] = []
        backend = make(canned(200, _score_reply(rows)), **({"on_reply": seen.append} if track else {}))
        assert await backend.score([10, 11, 12], [21, 22]) == [-1.25, -0.0]
        assert len(seen) == int(track)


async def test_a_score_reply_missing_the_completion_rows_is_backend_unavailable(
    canned: Any, make: Any
) -> None:
    for rows in (
        [None, {"11": {"logprob": -0.5}}],
        [None, {"11": {"logprob": -0.5}}, {"7": {"logprob": -1}}],
    ):
        backend = make(canned(200, _score_reply(rows)))
        with pytest.raises(BackendUnavailable, match="prompt_logprobs"):
            await backend.score([10, 11], [21])
    backend = make(canned(200, {"choices": [{"text": "", "finish_reason": "length"}]}))
    with pytest.raises(BackendUnavailable, match="prompt_logprobs"):
        await backend.score([10, 11], [21])
