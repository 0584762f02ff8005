"""OpenAI Chat through the real proxy and the real vLLM server, with the official `openai` SDK.

Exactness: the ids the proxy records are the ids vLLM returned (read off the wire by a recording
transport), and their logprobs match a float32 transformers teacher-forced recompute.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from openai import OpenAI

from openenv.capture.canonical import SamplingParams
from openenv.capture.server import CaptureServer
from openenv.capture.sync_session import SyncCaptureSession
from openenv.testing.teacher import teacher_logprobs

SAMPLING = SamplingParams(max_tokens=12, temperature=1.0)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'


def sdk(session: SyncCaptureSession) -> OpenAI:
    return OpenAI(base_url=session.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_non_stream_records_exactly_what_vllm_sampled(
    proxy: CaptureServer, replies: list[dict[str, Any]], teacher: Any
) -> None:
    session = proxy.open_session(mode="auto", sampling=SAMPLING)
    reply = sdk(session).chat.completions.create(model="tiny", messages=MESSAGES, temperature=0.0)
    vllm = replies[-1]["choices"][0]
    row = session.sequences()[0]
    assert row.completion_ids == vllm["token_ids"]
    assert row.logprobs == vllm["logprobs"]["token_logprobs"]
    assert (
        max(
            abs(a - b)
            for a, b in zip(row.logprobs, teacher_logprobs(teacher, row.prompt_ids, row.completion_ids))
        )
        < 1e-4
    )
    assert reply.usage is not None and reply.usage.completion_tokens == len(row.completion_ids) == 12
    assert reply.choices[0].finish_reason == "length"
    assert reply.model == "tiny" and reply.id.startswith("chatcmpl-")


def test_every_turn_vllm_is_prompted_with_exactly_the_recorded_ids(
    proxy: CaptureServer, replies: list[dict[str, Any]]
) -> None:
    """The prompt a later turn sends vLLM is spliced from the sequence's stored ids (as JSON text kept
    since the first turn): vLLM's own `prompt_token_ids` must be the recorded row, turn by turn."""
    session = proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=6, temperature=1.0))
    client, messages = sdk(session), list(MESSAGES)
    for k in range(5):
        reply = client.chat.completions.create(model="tiny", messages=messages)
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content or ""},
            {"role": "user", "content": f"And now step {k} of the work, please."},
        ]
    (row,), stats = session.sequences(), session.stats()
    assert stats.merge_ratio == 1.0 and stats.turns == 5
    whole = row.prompt_ids + row.completion_ids
    for turn, vllm in zip(session.turns(), replies[-5:], strict=True):
        choice = vllm["choices"][0]
        assert choice["prompt_token_ids"] == whole[: turn.prompt_len]
        assert choice["token_ids"] == whole[turn.prompt_len : turn.prompt_len + len(choice["token_ids"])]


def test_proxy_sampling_overrides_the_harness(proxy: CaptureServer, replies: list[dict[str, Any]]) -> None:
    session = proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=3, temperature=0.7))
    sdk(session).chat.completions.create(model="tiny", messages=MESSAGES, temperature=0.0, max_tokens=50)
    assert len(replies[-1]["choices"][0]["token_ids"]) == 3


def test_stream_chunk_grammar_and_usage(proxy: CaptureServer, replies: list[dict[str, Any]]) -> None:
    session = proxy.open_session(mode="auto", sampling=SAMPLING)
    chunks = list(
        sdk(session).chat.completions.create(
            model="tiny", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 12
    assert len({c.id for c in chunks}) == 1
    done = session.turns()[-1].completion
    assert done is not None
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == done.text
    assert list(done.token_ids) == replies[-1]["choices"][0]["token_ids"]


def test_stream_without_include_usage_ends_with_the_finish_chunk(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="auto", sampling=SAMPLING)
    with httpx.stream(
        "POST",
        session.base_url + "/v1/chat/completions",
        json={"model": "tiny", "messages": MESSAGES, "stream": True},
        timeout=60,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = [line for line in response.iter_lines() if line]
    assert frames[-1] == "data: [DONE]"
    assert json.loads(frames[-2][len("data: ") :])["choices"][0]["finish_reason"] == "length"


def _gated_tool_call(session: SyncCaptureSession, **kwargs: Any) -> Any:
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(kwargs.pop("call"), model="tiny", messages=MESSAGES, tools=TOOLS, **kwargs)
        pending = session.next_pending(timeout=60)
        assert pending is not None
        pending.complete(text=CALL)
        return reply.result(60)


def test_tool_call_non_stream(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated")
    reply = _gated_tool_call(session, call=sdk(session).chat.completions.create)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert (call.type, call.function.name, json.loads(call.function.arguments)) == (
        "function",
        "bash",
        {"command": "ls -la"},
    )


def test_tool_call_stream_accumulates_to_the_non_stream_reply(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated")
    client = sdk(session)

    def streamed(**kwargs: Any) -> Any:
        with client.chat.completions.stream(**kwargs) as stream:
            for _ in stream:
                pass
            return stream.get_final_completion()

    final = _gated_tool_call(session, call=streamed)
    plain = _gated_tool_call(session, call=client.chat.completions.create)
    got, want = final.choices[0], plain.choices[0]
    assert got.finish_reason == want.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in got.message.tool_calls] == [
        (c.function.name, c.function.arguments) for c in want.message.tool_calls
    ]
    assert got.message.tool_calls[0].id.startswith("call_")


def test_array_content_in_tool_messages_renders_like_a_string(proxy: CaptureServer) -> None:
    """Qwen Code sends tool results as `[{"type": "text", "text": ...}]`."""
    session = proxy.open_session(mode="gated")
    messages: list[dict[str, Any]] = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
    ]
    prompts = []
    for content in ("a.txt", [{"type": "text", "text": "a.txt"}]):
        body = {
            "model": "tiny",
            "tools": TOOLS,
            "messages": [*messages, {"role": "tool", "tool_call_id": "c1", "content": content}],
        }
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(httpx.post, session.base_url + "/v1/chat/completions", json=body, timeout=60)
            pending = session.next_pending(timeout=60)
            assert pending is not None
            prompts.append(pending.prompt_ids)
            pending.complete(text="ok")
            assert reply.result(60).status_code == 200
    assert prompts[0] == prompts[1]


def test_models_lists_the_served_model(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="auto")
    assert [m.id for m in sdk(session).models.list()] == ["tiny"]
