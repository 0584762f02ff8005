"""Several vLLM engines behind one backend: two real vLLM CPU servers on the tiny model.

A session stays on the engine it started on (its prefix cache is there), a new session goes to the
least-loaded engine, and an engine that fails leaves the rotation until it passes a health check again.
The second engine sits behind a `FaultProxy`, so the tests take it down and bring it back. It is the capture
package's other vLLM server (`raw_vllm_url`, tests/capture/conftest.py), shared with the logprob-mode tests
rather than a third one: the pool routes by load, never by logprob mode, and these tests sample greedily,
where its raw logprobs and the suite server's processed ones are the same `log_softmax(logits)`. The last
test is about that difference: a session that moves from one to the other at T=0.5.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.capture.backends.vllm import VLLMBackend
from openenv.capture.backends.vllm_engines import VLLMEngines, vllm_backend
from openenv.capture.canonical import SamplingParams
from openenv.errors import BackendUnavailable, BadRequest
from openenv.soak.faults import FaultProxy

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PARAMS = SamplingParams(max_tokens=4, temperature=0.0)


@pytest.fixture
def flaky(raw_vllm_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(raw_vllm_url) as proxy:
        yield proxy


def _prompt(renderer, text: str) -> list[int]:  # type: ignore[no-untyped-def]
    return renderer.tokenizer.encode(text)


def test_one_url_is_a_plain_vllm_backend_and_several_are_engines(vllm_url: str):
    assert isinstance(vllm_backend(vllm_url), VLLMBackend)
    both = vllm_backend(f"{vllm_url}, http://127.0.0.1:9/")
    assert isinstance(both, VLLMEngines) and [e.url for e in both.engines] == [vllm_url, "http://127.0.0.1:9"]
    with pytest.raises(BadRequest, match="at least one engine"):
        vllm_backend(" , ")


async def test_sessions_spread_to_the_least_loaded_engine_and_stay_there(
    vllm_url: str, flaky: FaultProxy, renderer
):
    engines = VLLMEngines([vllm_url, flaky.url])
    sessions = [engines.bind(f"s{i}") for i in range(4)]
    try:
        for turn in range(3):
            await asyncio.gather(
                *(
                    s.generate(_prompt(renderer, f"session {i} turn {turn}"), PARAMS)
                    for i, s in enumerate(sessions)
                )
            )
            if turn == 0:
                first = [s.engine.url for s in sessions]  # type: ignore[union-attr]
        assert [s.engine.url for s in sessions] == first  # type: ignore[union-attr]
        loads = engines.loads()
        assert sorted(first) == sorted([vllm_url, flaky.url] * 2)  # 2 sessions on each engine
        assert (
            loads[vllm_url]["calls"] == loads[flaky.url]["calls"] == 6 and loads[flaky.url]["sessions"] == 2
        )
        assert flaky.stats["pass"] == 6 + 1  # 6 completions + the model lookup, all through this engine
        sessions[0].release()
        sessions[2].release()
        third = engines.bind("late")
        await third.generate(_prompt(renderer, "late"), PARAMS)
        freed = {first[0], first[2]}
        assert len(freed) == 2 or third.engine.url in freed  # type: ignore[union-attr]
    finally:
        await engines.aclose()


async def test_a_failing_engine_leaves_the_rotation_and_its_sessions_move_without_an_error(
    vllm_url: str, flaky: FaultProxy, renderer
):
    engines = VLLMEngines([flaky.url, vllm_url], recheck_s=0.5)
    try:
        pinned = engines.bind("a")
        await pinned.generate(_prompt(renderer, "warm"), PARAMS)
        assert pinned.engine.url == flaky.url  # type: ignore[union-attr]  (listed first, both idle)
        flaky.set("down")
        reply = await pinned.generate(_prompt(renderer, "while down"), PARAMS)  # moved, answered
        assert reply.token_ids and pinned.engine.url == vllm_url  # type: ignore[union-attr]
        assert engines.loads()[flaky.url]["healthy"] is False
        newcomer = engines.bind("b")
        await newcomer.generate(_prompt(renderer, "new"), PARAMS)
        assert newcomer.engine.url == vllm_url  # type: ignore[union-attr]  (the down engine is skipped)
        await asyncio.sleep(0.6)
        late = engines.bind("c")
        await late.generate(_prompt(renderer, "still down"), PARAMS)  # the health check fails: still out
        assert late.engine.url == vllm_url and engines.loads()[flaky.url]["healthy"] is False  # type: ignore[union-attr]
        flaky.set("pass")
        await asyncio.sleep(0.6)
        back = engines.bind("d")
        await back.generate(_prompt(renderer, "back"), PARAMS)
        assert back.engine.url == flaky.url and engines.loads()[flaky.url]["healthy"] is True  # type: ignore[union-attr]
    finally:
        await engines.aclose()


async def test_with_every_engine_down_the_call_is_a_retryable_backend_error(flaky: FaultProxy, renderer):
    engines = VLLMEngines([flaky.url, "http://127.0.0.1:9"], recheck_s=30)
    try:
        flaky.set("down")
        with pytest.raises(BackendUnavailable):
            await engines.bind("x").generate(_prompt(renderer, "nobody home"), PARAMS)
        with pytest.raises(BackendUnavailable, match="no vLLM engine is healthy"):
            await engines.bind("y").generate(_prompt(renderer, "still nobody"), PARAMS)
    finally:
        await engines.aclose()


def test_the_proxy_pins_each_session_and_releases_it_at_close(
    vllm_url: str, flaky: FaultProxy, tiny_model: Path
):
    from openai import OpenAI

    from openenv.capture.server import CaptureServer

    engines = VLLMEngines([vllm_url, flaky.url])
    with CaptureServer(backend=engines, model=tiny_model) as server:
        sessions = [server.open_session(mode="auto") for _ in range(2)]
        for session in sessions:
            client = OpenAI(base_url=f"{session.base_url}/v1", api_key="x", max_retries=0)
            for turn in range(2):
                client.chat.completions.create(
                    model="tiny", max_tokens=4, messages=[{"role": "user", "content": f"hi {turn}"}]
                )
        loads = engines.loads()
        assert loads[vllm_url]["sessions"] == loads[flaky.url]["sessions"] == 1
        assert loads[vllm_url]["calls"] >= 2 and loads[flaky.url]["calls"] >= 2
        for session in sessions:
            server.close_session(session.token)
        assert [e["sessions"] for e in engines.loads().values()] == [0, 0]


def test_a_proxy_over_several_engines_streams_the_tokens_it_would_answer_whole(
    vllm_url: str, flaky: FaultProxy, tiny_model: Path
):
    """Streamed turns go through each session's pinned engine, arrive in several deltas while vLLM samples,
    and record the same greedy tokens as a non-streamed turn (both engines serve the same model)."""
    from openai import OpenAI

    from openenv.capture.server import CaptureServer

    engines = VLLMEngines([vllm_url, flaky.url])
    ask = {
        "model": "tiny",
        "max_tokens": 24,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "Write a long story about a robot."}],
    }
    with CaptureServer(backend=engines, model=tiny_model) as server:
        sessions = [server.open_session(mode="auto") for _ in range(3)]
        texts = []
        for session in sessions[:2]:
            client = OpenAI(base_url=f"{session.base_url}/v1", api_key="x", max_retries=0)
            deltas = [
                c.choices[0].delta.content
                for c in client.chat.completions.create(**ask, stream=True)
                if c.choices and c.choices[0].delta.content
            ]
            assert len(deltas) > 1, "the reply streamed in pieces"
            texts.append("".join(deltas))
        whole = OpenAI(base_url=f"{sessions[2].base_url}/v1", api_key="x", max_retries=0)
        answer = whole.chat.completions.create(**ask).choices[0].message.content
        streamed = [s.turns()[0].completion for s in sessions[:2]]
        unstreamed = sessions[2].turns()[0].completion
        assert all(
            c is not None
            and unstreamed is not None
            and c.token_ids == unstreamed.token_ids
            and c.logprobs == unstreamed.logprobs
            for c in streamed
        )
        assert texts == [answer, answer]
        loads = engines.loads()
        assert loads[vllm_url]["calls"] >= 1 and loads[flaky.url]["calls"] >= 1, "both engines streamed"


def test_a_session_moved_to_an_engine_of_another_logprob_mode_records_that_engines_mode(
    vllm_url: str, raw_vllm_url: str, tiny_model: Path
):
    """Engines of one pool may disagree on what their logprobs are. A session that moves mid-episode marks
    each turn with the mode of the engine that sampled it: a session that kept its first engine's verdict
    called the raw engine's T=0.5 logprobs the trainer's distribution (trainable)."""
    from openai import OpenAI

    from openenv.capture.server import CaptureServer

    with FaultProxy(vllm_url) as processed:
        engines = VLLMEngines([processed.url, raw_vllm_url])
        with CaptureServer(backend=engines, model=tiny_model) as server:
            session = server.open_session(
                mode="auto", sampling=SamplingParams(max_tokens=4, temperature=0.5), sampling_policy="request"
            )
            client = OpenAI(base_url=f"{session.base_url}/v1", api_key="x", max_retries=0)
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "one"}])
            processed.set("down")
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "two"}])
            first, second = session.turns()
            assert engines.loads()[raw_vllm_url]["calls"] >= 1, (
                "the second turn was sampled on the raw engine"
            )
            assert (first.logprob_mode, first.trainable) == ("processed", True)
            assert (second.logprob_mode, second.trainable) == ("raw", False)
