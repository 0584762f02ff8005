"""A recorded logprob is the one the token was sampled with: `log_softmax(logits / T)`, as the trainer
recomputes it, on both backends, in every dialect, streamed or not, at temperatures other than 1.

Before this was so, a session at T=0.5 recorded raw `log_softmax(logits)` on both backends: 2.6-2.8 nats
off on a 48-token reply against what was sampled, silently (issue 44). The teacher here is float32
transformers scoring the recorded ids, divided by T exactly as TRL divides its logits.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as gtypes

from openenv.capture.canonical import SamplingParams
from openenv.capture.server import CaptureServer
from openenv.capture.sync_session import SyncCaptureSession
from openenv.testing.teacher import teacher_logprobs

SYSTEM = "Be brief."
USER = "Say hello and list the files."


def _chat(session: SyncCaptureSession, stream: bool) -> None:
    client = openai.OpenAI(
        base_url=session.base_url + "/v1", api_key=session.token, max_retries=0, timeout=120
    )
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    for k in range(2):  # two turns: the second merges, with env tokens between the sampled spans
        if stream:  # (the SDK's `.stream()` helper refuses a reply cut at max_tokens)
            chunks = client.chat.completions.create(model="tiny", messages=messages, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = (
                client.chat.completions.create(model="tiny", messages=messages).choices[0].message.content
                or ""
            )
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Now step {k}."}]


def _responses(session: SyncCaptureSession, stream: bool) -> None:
    client = openai.OpenAI(
        base_url=session.base_url + "/v1", api_key=session.token, max_retries=0, timeout=120
    )
    if stream:
        with client.responses.stream(model="tiny", instructions=SYSTEM, input=USER) as s:
            list(s)
    else:
        client.responses.create(model="tiny", instructions=SYSTEM, input=USER)


def _anthropic(session: SyncCaptureSession, stream: bool) -> None:
    client = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
    kwargs: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": USER}],
    }
    if stream:
        with client.messages.stream(**kwargs) as s:
            s.get_final_message()
    else:
        client.messages.create(**kwargs)


def _gemini(session: SyncCaptureSession, stream: bool) -> None:
    options = gtypes.HttpOptions(base_url=session.base_url, api_version="v1beta")
    client = genai.Client(api_key=session.token, http_options=options)
    config = gtypes.GenerateContentConfig(system_instruction=SYSTEM)
    if stream:
        list(client.models.generate_content_stream(model="tiny", contents=USER, config=config))
    else:
        client.models.generate_content(model="tiny", contents=USER, config=config)


DIALECTS = {"openai_chat": _chat, "openai_responses": _responses, "anthropic": _anthropic, "gemini": _gemini}


def assert_sampling_logprobs(session: SyncCaptureSession, teacher: Any, temperature: float) -> int:
    """Every model token's recorded logprob equals the teacher's `log_softmax(logits / T)` within 1e-4, and
    the rows say so; returns how many tokens were checked."""
    checked = 0
    for row in session.sequences():
        expected = teacher_logprobs(teacher, row.prompt_ids, row.completion_ids, temperature)
        errors = [abs(a - b) for a, b, m in zip(row.logprobs, expected, row.env_mask, strict=True) if m == 1]
        assert errors and max(errors) < 1e-4, f"max error {max(errors or [0])} at T={temperature}"
        assert (row.temperature, row.logprob_mode, row.trainable) == (temperature, "processed", True)
        checked += len(errors)
    return checked


@pytest.mark.vllm
@pytest.mark.parametrize("temperature", [0.5, 1.3])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_recorded_logprobs_are_the_sampling_distributions(
    any_proxy: CaptureServer, teacher: Any, dialect: str, stream: bool, temperature: float
) -> None:
    session = any_proxy.open_session(
        mode="auto", sampling=SamplingParams(max_tokens=24, temperature=temperature)
    )
    DIALECTS[dialect](session, stream)
    assert assert_sampling_logprobs(session, teacher, temperature) >= 1
    assert {(t.temperature, t.logprob_mode, t.trainable) for t in session.turns()} == {
        (temperature, "processed", True)
    }


@pytest.mark.vllm
def test_the_raw_value_would_have_failed(any_proxy: CaptureServer, teacher: Any) -> None:
    """The check can fail: at T=0.5 the recorded logprobs are far from the raw log_softmax(logits)."""
    session = any_proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=24, temperature=0.5))
    _chat(session, stream=False)
    row = session.sequences()[0]
    raw = teacher_logprobs(teacher, row.prompt_ids, row.completion_ids, 1.0)
    assert sum(abs(a - b) for a, b, m in zip(row.logprobs, raw, row.env_mask, strict=True) if m == 1) > 0.1


def test_a_scored_reply_is_recorded_at_the_sessions_temperature_on_the_local_backend(
    local_proxy: CaptureServer, teacher: Any
) -> None:
    """A controller's `complete()` reply is scored at the trainer's temperature (the local backend can)."""
    from concurrent.futures import ThreadPoolExecutor

    session = local_proxy.open_session(mode="gated", sampling=SamplingParams(max_tokens=8, temperature=0.7))
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(_chat, session, False)
        for _ in range(2):
            pending = session.next_pending(timeout=60)
            assert pending is not None
            pending.complete(text="Hello there, friend.")
        reply.result(60)
    assert assert_sampling_logprobs(session, teacher, 0.7) > 4
