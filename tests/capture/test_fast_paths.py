"""`OPENENV_FAST_PATHS=0` swaps each hand-written fast path on the token-exact path for the maintained
library it stands in for, with the same results: plain pydantic for `BodyParser`, `tokenizer.encode` for
the word encoder, httpx for `EngineHTTP`. CI also runs the equivalence suites with it (scripts/test.sh)."""

from __future__ import annotations

import json

import pytest

from openenv.capture.backends import VLLMBackend
from openenv.capture.backends import vllm as vllm_module
from openenv.capture.backends.engine_http import EngineHTTP, HttpxEngine, engine_client
from openenv.capture.canonical import Message, SamplingParams, TextPart
from openenv.capture.dialects._body import BodyParser
from openenv.capture.dialects._shared import parse_body
from openenv.capture.dialects.openai_chat import protocol as chat
from openenv.capture.fast_paths import ENV, fast_paths
from openenv.capture.renderer import Renderer

BODY = json.dumps(
    {
        "model": "tiny",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}],
    }
).encode()
TEXT = "def f(a_b, c2=30_000):\n\treturn a_b ** 2  # ok?! <|im_end|> naïve"


@pytest.mark.parametrize(("value", "on"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_the_switch_is_on_unless_set_to_zero(
    monkeypatch: pytest.MonkeyPatch, value: str | None, on: bool
) -> None:
    if value is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, value)
    assert fast_paths() is on


@pytest.mark.parametrize("on", [True, False])
def test_bodies_parse_the_same_and_only_the_fast_parser_remembers_items(
    monkeypatch: pytest.MonkeyPatch, on: bool
) -> None:
    monkeypatch.setenv(ENV, "1" if on else "0")
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"))
    assert parser.parse(BODY) == parse_body(chat.ChatCompletionRequest, BODY)
    assert (parser.misses > 0) is on  # off: plain pydantic validated the body, item memory untouched


@pytest.mark.parametrize("on", [True, False])
def test_the_renderer_encodes_the_same_and_calls_the_tokenizer_only_when_off(
    monkeypatch: pytest.MonkeyPatch, renderer: Renderer, on: bool
) -> None:
    monkeypatch.setenv(ENV, "1" if on else "0")
    tokenizer = renderer.tokenizer
    fresh = Renderer(tokenizer)
    calls: list[str] = []
    plain = tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda text, **kw: calls.append(text) or plain(text, **kw))
    assert fresh.encode(TEXT) == plain(TEXT, add_special_tokens=False)
    assert bool(calls) is not on


async def test_the_vllm_backend_talks_through_httpx_when_off(
    monkeypatch: pytest.MonkeyPatch, vllm_url: str, renderer: Renderer
) -> None:
    prompt = renderer.full_prompt((Message(role="user", parts=(TextPart(text="hello"),)),), ())[1]
    params = SamplingParams(max_tokens=6, temperature=0.0)
    got = {}
    made: list[object] = []
    real = vllm_module.engine_client
    monkeypatch.setattr(vllm_module, "engine_client", lambda *a, **kw: made.append(c := real(*a, **kw)) or c)
    for on in (True, False):
        monkeypatch.setenv(ENV, "1" if on else "0")
        client = engine_client(vllm_url, timeout=5.0)
        assert isinstance(client, EngineHTTP if on else HttpxEngine)
        client.close()
        backend = VLLMBackend(vllm_url)
        try:
            got[on] = await backend.generate(prompt, params)
            assert isinstance(made[-1], EngineHTTP if on else HttpxEngine)
        finally:
            await backend.aclose()
    assert got[True].token_ids == got[False].token_ids
    assert got[True].logprobs == pytest.approx(got[False].logprobs, abs=1e-4)
