"""Every dialect through its official SDK, against the real proxy app and a real backend.

Each SDK plays a harness in a worker thread: it asks with one `bash` tool, the controller makes the
model "emit" a tool call with `complete(text=...)` (the tiny random model rarely writes one), the SDK
sends the tool result back, and the backend samples the final turn. The conversation must form one
training sequence, and the same conversation must render the same prompt ids in every dialect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gtypes

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.session import SyncPendingTurn
from openenv.capture.sync_session import SyncCaptureSession
from openenv.core.net import free_port

SYSTEM = "You are a coding agent."
USER = "How many files are there?"
RESULT = "a.txt\nb.txt"
BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
SHORT = SamplingParams(max_tokens=6, temperature=1.0)
CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'


class Conversation(Protocol):
    """One harness conversation in one dialect, kept in that SDK's own types."""

    def send(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Ask; append the model's reply to the history; return its calls (id, name, args)."""
        ...

    def answer(self, call_id: str, name: str, content: str) -> None:
        """Append a tool result."""
        ...


class ChatConversation:
    def __init__(self, session: SyncCaptureSession, stream: bool) -> None:
        self.client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
        self.stream = stream
        self.tools = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]
        self.messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]

    def send(self) -> list[tuple[str, str, dict[str, Any]]]:
        if self.stream:
            with self.client.chat.completions.stream(
                model="tiny", messages=self.messages, tools=self.tools
            ) as s:
                message = s.get_final_completion().choices[0].message
        else:
            message = self.client.chat.completions.create(
                model="tiny", messages=self.messages, tools=self.tools
            )
            message = message.choices[0].message
        self.messages.append(message.model_dump(exclude_none=True, exclude={"annotations", "parsed"}))
        return [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]

    def answer(self, call_id: str, name: str, content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


class ResponsesConversation:
    def __init__(self, session: SyncCaptureSession, stream: bool) -> None:
        self.client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
        self.stream = stream
        self.tools = [{"type": "function", "name": "bash", "parameters": BASH, "strict": False}]
        self.input: list[Any] = [{"role": "user", "content": USER}]

    def send(self) -> list[tuple[str, str, dict[str, Any]]]:
        kwargs = {"model": "tiny", "instructions": SYSTEM, "input": self.input, "tools": self.tools}
        if self.stream:
            with self.client.responses.stream(**kwargs) as s:  # a turn cut by max tokens ends "incomplete"
                ends = ("response.completed", "response.incomplete")
                response = [e.response for e in s if e.type in ends][-1]
        else:
            response = self.client.responses.create(**kwargs)
        self.input += [item.model_dump(exclude_none=True) for item in response.output]
        return [
            (i.call_id, i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"
        ]

    def answer(self, call_id: str, name: str, content: str) -> None:
        self.input.append({"type": "function_call_output", "call_id": call_id, "output": content})


class AnthropicConversation:
    def __init__(self, session: SyncCaptureSession, stream: bool) -> None:
        self.client = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
        self.stream = stream
        self.tools = [{"name": "bash", "input_schema": BASH}]
        self.messages: list[Any] = [{"role": "user", "content": USER}]

    def send(self) -> list[tuple[str, str, dict[str, Any]]]:
        kwargs = {
            "model": "tiny",
            "max_tokens": 64,
            "system": SYSTEM,
            "messages": self.messages,
            "tools": self.tools,
        }
        if self.stream:
            with self.client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = self.client.messages.create(**kwargs)
        self.messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
        return [(b.id, b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]

    def answer(self, call_id: str, name: str, content: str) -> None:
        self.messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": content}]}
        )


class GeminiConversation:
    def __init__(self, session: SyncCaptureSession, stream: bool) -> None:
        options = gtypes.HttpOptions(base_url=session.base_url, api_version="v1beta")
        self.client = genai.Client(api_key=session.token, http_options=options)
        self.stream = stream
        self.config = gtypes.GenerateContentConfig(
            system_instruction=SYSTEM,
            tools=[
                gtypes.Tool(
                    function_declarations=[
                        gtypes.FunctionDeclaration(name="bash", parameters_json_schema=BASH)
                    ]
                )
            ],
            automatic_function_calling=gtypes.AutomaticFunctionCallingConfig(disable=True),
        )
        self.contents: list[gtypes.Content] = [gtypes.Content(role="user", parts=[gtypes.Part(text=USER)])]

    def send(self) -> list[tuple[str, str, dict[str, Any]]]:
        models = self.client.models
        if self.stream:
            chunks = list(
                models.generate_content_stream(model="tiny", contents=self.contents, config=self.config)
            )
            parts = [p for c in chunks for p in c.candidates[0].content.parts or []]
        else:
            reply = models.generate_content(model="tiny", contents=self.contents, config=self.config)
            parts = reply.candidates[0].content.parts or []
        self.contents.append(gtypes.Content(role="model", parts=parts))
        return [
            (p.function_call.id, p.function_call.name, dict(p.function_call.args or {}))
            for p in parts
            if p.function_call
        ]

    def answer(self, call_id: str, name: str, content: str) -> None:
        response = gtypes.FunctionResponse(id=call_id, name=name, response={"output": content})
        self.contents.append(gtypes.Content(role="user", parts=[gtypes.Part(function_response=response)]))


CONVERSATIONS: dict[str, Callable[[SyncCaptureSession, bool], Conversation]] = {
    "openai_chat": ChatConversation,
    "openai_responses": ResponsesConversation,
    "anthropic": AnthropicConversation,
    "gemini": GeminiConversation,
}


def play(session: SyncCaptureSession, conversation: Conversation) -> list[list[int]]:
    """Tool call (controller-supplied) -> tool result -> sampled answer; returns each turn's prompt ids."""
    prompts: list[list[int]] = []

    def turn(answer: Callable[[SyncPendingTurn], object]) -> list[tuple[str, str, dict[str, Any]]]:
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(conversation.send)
            pending = session.next_pending(timeout=120)
            assert pending is not None, "the SDK's request never reached the controller"
            prompts.append(list(pending.prompt_ids))
            answer(pending)
            return reply.result(120)

    calls = turn(lambda p: p.complete(text=CALL))
    assert [(name, args) for _, name, args in calls] == [("bash", {"command": "ls"})]
    conversation.answer(calls[0][0], "bash", RESULT)
    turn(lambda p: p.sample())
    return prompts


@pytest.mark.vllm
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", ["openai_responses", "anthropic", "gemini"])
def test_sdk_tool_round_trip_is_one_token_exact_sequence(proxy: CaptureServer, dialect: str, stream: bool):
    session = proxy.open_session(mode="gated", sampling=SHORT)
    play(session, CONVERSATIONS[dialect](session, stream))
    stats, (row,) = session.stats(), session.sequences()
    assert (stats.turns, stats.sequences, stats.breaks, stats.merge_ratio) == (2, 1, 0, 1.0)
    assert {t.dialect for t in session.turns()} == {dialect}
    sampled = session.turns()[-1].completion
    assert sampled is not None and sampled.token_ids
    n = len(sampled.token_ids)
    assert (row.completion_ids[-n:], row.logprobs[-n:]) == (list(sampled.token_ids), list(sampled.logprobs))
    assert len(row.logprobs) == len(row.env_mask) == len(row.completion_ids)
    assert all(lp < 0.0 for lp, m in zip(row.logprobs, row.env_mask, strict=True) if m == 1)


@pytest.mark.vllm
def test_same_conversation_renders_identical_prompt_ids_in_every_dialect(proxy: CaptureServer):
    prompts = {}
    for name, conversation in CONVERSATIONS.items():
        session = proxy.open_session(mode="gated", sampling=SHORT)
        prompts[name] = play(session, conversation(session, False))
    first, *others = prompts.values()
    assert all(p == first for p in others), {k: [len(x) for x in v] for k, v in prompts.items()}


@pytest.mark.vllm
def test_anthropic_count_tokens_is_the_prompt_length_and_stores_no_turn(proxy: CaptureServer):
    session = proxy.open_session(mode="gated", sampling=SHORT)
    client = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
    messages = [{"role": "user", "content": USER}]
    count = client.messages.count_tokens(model="tiny", system=SYSTEM, messages=messages).input_tokens
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            client.messages.create, model="tiny", max_tokens=4, system=SYSTEM, messages=messages
        )
        pending = session.next_pending(timeout=120)
        assert pending is not None
        pending.complete(text="Two.")
        reply.result(120)
    assert count == len(pending.prompt_ids)
    assert [t.aux for t in session.turns()] == [False]  # counted, not stored: a loop of them costs no memory
    assert session.count_tokens_calls == 1


def test_unknown_session_is_refused_in_each_sdk_own_error(renderer: Renderer):
    backend = VLLMBackend(f"http://127.0.0.1:{free_port()}")
    with CaptureServer(backend=backend, renderer=renderer) as server:
        base = f"{server.base_url}/s/not-a-session"
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=base, api_key="x", max_retries=0).messages.create(
                model="tiny", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0).responses.create(
                model="tiny", input="hi"
            )
        options = gtypes.HttpOptions(
            base_url=base, api_version="v1beta", retry_options=gtypes.HttpRetryOptions(attempts=1)
        )
        gemini = genai.Client(api_key="x", http_options=options)  # keep it referenced: dropping it closes it
        with pytest.raises(genai_errors.ClientError) as info:
            gemini.models.generate_content(model="tiny", contents="hi")
        assert info.value.status == "UNAUTHENTICATED"


def test_backend_down_is_each_sdk_retryable_error(renderer: Renderer):
    """Nothing listens on the backend port: Anthropic gets 529 overloaded, OpenAI 503, Gemini 503."""
    backend = VLLMBackend(f"http://127.0.0.1:{free_port()}")
    with CaptureServer(backend=backend, renderer=renderer) as server:
        session = server.open_session(mode="auto")
        with pytest.raises(anthropic.OverloadedError):
            anthropic.Anthropic(base_url=session.base_url, api_key="x", max_retries=0).messages.create(
                model="tiny", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.InternalServerError) as oai:
            openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0).responses.create(
                model="tiny", input="hi"
            )
        assert oai.value.status_code == 503
        options = gtypes.HttpOptions(
            base_url=session.base_url, api_version="v1beta", retry_options=gtypes.HttpRetryOptions(attempts=1)
        )
        gemini = genai.Client(api_key="x", http_options=options)  # keep it referenced: dropping it closes it
        with pytest.raises(genai_errors.ServerError) as info:
            gemini.models.generate_content(model="tiny", contents="hi")
        assert (info.value.code, info.value.status) == (503, "UNAVAILABLE")


@pytest.mark.vllm
def test_gemini_cli_router_reply_is_decoded_under_its_json_schema(proxy: CaptureServer, harness_request):
    """The router call's responseJsonSchema reaches vLLM as a structured-output constraint. The random
    tiny model pads JSON with whitespace (vLLM allows any by default), so within a few greedy tokens
    the check is that the constrained reply opens a JSON object and the unconstrained one does not."""
    import httpx

    recorded = harness_request("gemini/gemini_cli_router")
    body = recorded["body"]
    free = body | {"generationConfig": {"temperature": 0}}
    session = proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=12, temperature=0.0))
    session.session.sampling_policy = (
        "request"  # a serving proxy: a training one drops the schema (sampling_policy.py)
    )

    def reply_text(payload: dict[str, Any]) -> str:
        reply = httpx.post(session.base_url + recorded["path"], json=payload, timeout=120)
        assert reply.status_code == 200, reply.text
        return reply.json()["candidates"][0]["content"]["parts"][0]["text"]

    assert reply_text(body).startswith("{")
    assert not reply_text(free).lstrip().startswith("{")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", list(CONVERSATIONS))
def test_a_budget_of_n_turns_ends_the_conversation_after_exactly_n_turns(
    local_proxy: CaptureServer, dialect: str, stream: bool
):
    """Each turn the policy calls a tool; after N the SDK gets a well-formed final reply (no tool call),
    so a harness loop ends cleanly, and the session says which cap was hit."""
    from openenv.capture.budget import Budget

    n = 2
    session = local_proxy.open_session(mode="gated", sampling=SHORT)
    session.set_budget(Budget(max_turns=n))
    conversation = CONVERSATIONS[dialect](session, stream)
    for _ in range(n):
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(conversation.send)
            pending = session.next_pending(timeout=120)
            assert pending is not None
            pending.complete(text=CALL)
            [(call_id, name, _)] = reply.result(120)
        conversation.answer(call_id, name, RESULT)
    assert session.budget_hit is None
    assert conversation.send() == [], "the final reply calls no tool"
    assert session.next_pending(timeout=0.1) is None, "a request past the budget never reaches the controller"
    assert session.budget_hit == f"max_turns={n}"
    stats, turns = session.stats(), session.turns()
    assert stats.turns == n and stats.sequences == 1
    last = turns[-1]
    assert last.budget == f"max_turns={n}" and last.sequence is None and last.completion is not None
    assert "budget is spent" in last.completion.text and last.completion.token_ids == ()
