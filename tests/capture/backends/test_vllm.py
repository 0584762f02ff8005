"""`VLLMBackend` against the real vLLM server, and its error translation with `httpx.MockTransport`."""

from __future__ import annotations

import httpx
import pytest

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.errors import BackendUnavailable, BadRequest


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


def _backend(handler: httpx.MockTransport) -> VLLMBackend:
    return VLLMBackend("http://127.0.0.1:9", model="tiny", context_window=100, transport=handler)


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_become_backend_unavailable(status: int) -> None:
    backend = _backend(httpx.MockTransport(lambda r: httpx.Response(status, json={"error": {"message": "boom"}})))
    with pytest.raises(BackendUnavailable, match=f"answered {status}: boom"):
        await backend.generate([1, 2], SamplingParams())


async def test_a_rejected_request_is_a_bad_request() -> None:
    backend = _backend(httpx.MockTransport(lambda r: httpx.Response(400, json={"message": "too long"})))
    with pytest.raises(BadRequest, match="too long"):
        await backend.score([1], [2])


async def test_timeouts_and_refused_connections_are_backend_unavailable() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(BackendUnavailable, match="unreachable: ReadTimeout"):
        await _backend(httpx.MockTransport(timeout)).generate([1], SamplingParams())


async def test_a_reply_without_token_ids_is_backend_unavailable() -> None:
    reply = {"choices": [{"text": "hi", "finish_reason": "stop"}]}
    backend = _backend(httpx.MockTransport(lambda r: httpx.Response(200, json=reply)))
    with pytest.raises(BackendUnavailable, match="token_ids"):
        await backend.generate([1], SamplingParams())
