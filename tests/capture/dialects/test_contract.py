"""One contract over every dialect: the same conversation, the official SDK as the client.

Each case spells one conversation (system, user, a `bash` tool call, its result) in its wire format.
Requests travel from the vendor's own SDK through `httpx.MockTransport` into the route registry and
the dialect's pure functions; replies (JSON or SSE) go back to the SDK. No proxy app or model is
involved, so a failure here is the dialect's. A new dialect joins `CASES`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2 as httpx  # the official SDKs are built on httpx2 (same API as httpx)
import openai
import pytest
from google import genai
from google.genai import types as gtypes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openenv.capture.canonical import (
    CanonicalRequest,
    Message,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
)
from openenv.capture.dialects import RequestContext
from openenv.capture.dialects.state import DialectState
from openenv.errors import BackendUnavailable, OpenEnvError

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

SYSTEM = "You are terse."
USER = "List the files."
RESULT = "a.txt\nb.txt"
BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
DESCRIPTION = "Run a shell command."

EXPECTED_MESSAGES = (
    Message(role="system", parts=(TextPart(text=SYSTEM),)),
    Message(role="user", parts=(TextPart(text=USER),)),
    Message(role="assistant", parts=(ToolCallPart(id="call_1", name="bash", arguments='{"command": "ls"}'),)),
    Message(role="tool", parts=(ToolResultPart(tool_call_id="call_1", content=RESULT, name="bash"),)),
)
EXPECTED_TOOLS = (Tool(name="bash", description=DESCRIPTION, parameters=BASH),)


@dataclass(frozen=True)
class Reply:
    """What a client saw, normalized across SDKs."""

    reasoning: str
    text: str
    calls: list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict[str, Any]
    call: Callable[[httpx.Client, dict[str, Any], bool], Reply]  # (http client, body, stream) -> reply
    echo: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]  # (body, reply json) -> next body
    error: Callable[[httpx.Client], Exception]  # provoke a 401 through the SDK and return what it raised


# ---- OpenAI Chat ---------------------------------------------------------------------------------


def _chat_body() -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
        ],
        "tools": [
            {"type": "function", "function": {"name": "bash", "description": DESCRIPTION, "parameters": BASH}}
        ],
    }


def _openai(http: httpx.Client) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://proxy/v1", api_key="tok", http_client=http, max_retries=0)


def _chat_call(http: httpx.Client, body: dict[str, Any], stream: bool) -> Reply:
    client = _openai(http)
    if stream:
        with client.chat.completions.stream(**body) as events:
            message = events.get_final_completion().choices[0].message
    else:
        message = client.chat.completions.create(**body).choices[0].message
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    reasoning = getattr(message, "reasoning_content", None) or ""
    return Reply(reasoning, message.content or "", calls)


def _chat_echo(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    return body | {"messages": body["messages"] + [reply["choices"][0]["message"]]}


def _chat_error(http: httpx.Client) -> Exception:
    with pytest.raises(openai.AuthenticationError) as info:
        openai.OpenAI(
            base_url="http://proxy/v1", api_key="wrong", http_client=http, max_retries=0
        ).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    return info.value


# ---- OpenAI Responses ----------------------------------------------------------------------------


def _responses_body() -> dict[str, Any]:
    return {
        "model": "tiny",
        "instructions": SYSTEM,
        "input": [
            {"role": "user", "content": USER},
            {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"command": "ls"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": RESULT},
        ],
        "tools": [{"type": "function", "name": "bash", "description": DESCRIPTION, "parameters": BASH}],
    }


def _responses_call(http: httpx.Client, body: dict[str, Any], stream: bool) -> Reply:
    client = _openai(http)
    if stream:
        with client.responses.stream(**body) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**body)
    reasoning = "".join(c.text for i in response.output if i.type == "reasoning" for c in i.content or [])
    calls = [(i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call"]
    return Reply(reasoning, response.output_text, calls)


def _responses_echo(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    return body | {"input": body["input"] + reply["output"]}


def _responses_error(http: httpx.Client) -> Exception:
    with pytest.raises(openai.AuthenticationError) as info:
        openai.OpenAI(
            base_url="http://proxy/v1", api_key="wrong", http_client=http, max_retries=0
        ).responses.create(model="tiny", input="hi")
    return info.value


# ---- Anthropic Messages --------------------------------------------------------------------------


def _anthropic_body() -> dict[str, Any]:
    return {
        "model": "tiny",
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": USER},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": RESULT}],
            },
        ],
        "tools": [{"name": "bash", "description": DESCRIPTION, "input_schema": BASH}],
    }


def _anthropic(http: httpx.Client, key: str = "tok") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url="http://proxy", api_key=key, http_client=http, max_retries=0)


def _anthropic_call(http: httpx.Client, body: dict[str, Any], stream: bool) -> Reply:
    client = _anthropic(http)
    if stream:
        with client.messages.stream(**body) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**body)
    reasoning = "".join(b.thinking for b in message.content if b.type == "thinking")
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]  # type: ignore[arg-type]
    return Reply(reasoning, text, calls)


def _anthropic_echo(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    return body | {"messages": body["messages"] + [{"role": "assistant", "content": reply["content"]}]}


def _anthropic_error(http: httpx.Client) -> Exception:
    with pytest.raises(anthropic.AuthenticationError) as info:
        _anthropic(http, "wrong").messages.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    return info.value


# ---- Gemini --------------------------------------------------------------------------------------


def _gemini_body() -> dict[str, Any]:
    return {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [
            {"role": "user", "parts": [{"text": USER}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"id": "call_1", "name": "bash", "args": {"command": "ls"}}}],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "call_1", "name": "bash", "response": {"output": RESULT}}}
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "bash", "description": DESCRIPTION, "parametersJsonSchema": BASH}
                ]
            }
        ],
    }


def _gemini(http: httpx.Client, key: str = "tok") -> genai.Client:
    options = gtypes.HttpOptions(
        base_url="http://proxy", httpx_client=http, retry_options=gtypes.HttpRetryOptions(attempts=1)
    )
    return genai.Client(api_key=key, http_options=options)


def _gemini_call(http: httpx.Client, body: dict[str, Any], stream: bool) -> Reply:
    client = _gemini(http)
    contents = [gtypes.Content.model_validate(c) for c in body["contents"]]
    config = gtypes.GenerateContentConfig(
        system_instruction=gtypes.Content.model_validate(body["systemInstruction"]),
        tools=[gtypes.Tool.model_validate(t) for t in body["tools"]],
        automatic_function_calling=gtypes.AutomaticFunctionCallingConfig(disable=True),
    )
    if stream:
        parts = [
            p
            for chunk in client.models.generate_content_stream(model="tiny", contents=contents, config=config)
            for p in chunk.candidates[0].content.parts or []
        ]
    else:
        reply = client.models.generate_content(model="tiny", contents=contents, config=config)
        parts = reply.candidates[0].content.parts or []
    reasoning = "".join(p.text or "" for p in parts if p.thought)
    text = "".join(p.text or "" for p in parts if not p.thought)
    calls = [(p.function_call.name, dict(p.function_call.args or {})) for p in parts if p.function_call]
    return Reply(reasoning, text, calls)  # type: ignore[arg-type]


def _gemini_echo(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    return body | {"contents": body["contents"] + [reply["candidates"][0]["content"]]}


def _gemini_error(http: httpx.Client) -> Exception:
    from google.genai import errors

    with pytest.raises(errors.ClientError) as info:
        _gemini(http, "wrong").models.generate_content(model="tiny", contents="hi")
    return info.value


CASES = [
    Case("openai_chat", "/v1/chat/completions", _chat_body(), _chat_call, _chat_echo, _chat_error),
    Case(
        "openai_responses",
        "/v1/responses",
        _responses_body(),
        _responses_call,
        _responses_echo,
        _responses_error,
    ),
    Case("anthropic", "/v1/messages", _anthropic_body(), _anthropic_call, _anthropic_echo, _anthropic_error),
    Case(
        "gemini",
        "/v1beta/models/tiny:generateContent",
        _gemini_body(),
        _gemini_call,
        _gemini_echo,
        _gemini_error,
    ),
]
IDS = [c.name for c in CASES]

# The golden SSE transcripts (tests/capture/fixtures/<dialect>/tool_use.sse): a reply long enough that its
# text and tool input arrive in several deltas, to a streamed request at this path.
_TOOL_REPLY = {
    "text": "Reading the file now. " * 4,
    "tool_calls": (
        ToolCallPart(
            id="call_2",
            name="bash",
            arguments=json.dumps({"command": "cat a.txt", "description": "Show a.txt"}),
        ),
    ),
}
GOLDEN: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {  # dialect -> (path, request, reply update)
    "openai_chat": (
        "/v1/chat/completions",
        {
            "model": "tiny",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
        },
        _TOOL_REPLY,
    ),
    "openai_responses": ("/v1/responses", {"model": "tiny", "input": "hi", "stream": True}, _TOOL_REPLY),
    "anthropic": (
        "/v1/messages",
        {"model": "tiny", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        _TOOL_REPLY,
    ),
    "gemini": (
        "/v1beta/models/tiny:streamGenerateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"text": "Reading the file now. " * 4},
    ),
}


@pytest.fixture
def canonical(parse_as, dialect_for) -> Callable[[Case, dict[str, Any]], CanonicalRequest]:
    return lambda case, body: dialect_for(case.path).to_canonical(parse_as(case.path, body), STATE)


# ---- the contract ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conversation_maps_to_the_same_canonical_messages_and_tools(case: Case, canonical):
    request = canonical(case, case.body)
    assert request.messages == EXPECTED_MESSAGES
    assert request.tools == EXPECTED_TOOLS


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_unknown_fields_are_accepted_and_ignored(case: Case, canonical):
    body = json.loads(json.dumps(case.body))
    body["x_future_option"] = {"enabled": True}
    history = next(v for k, v in body.items() if k in ("messages", "input", "contents"))
    history[-1]["x_future_annotation"] = "ignored"
    assert canonical(case, body).messages == EXPECTED_MESSAGES


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_official_sdk_reads_reasoning_text_and_tool_call(
    case: Case, sdk_http: httpx.Client, done, stream: bool
):
    reply = case.call(sdk_http, case.body, stream)
    assert reply == Reply(done.reasoning, done.text, [("bash", {"command": "cat a.txt"})])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_echoed_reply_comes_back_as_the_same_assistant_message(
    case: Case, parse_as, dialect_for, canonical, done
):
    """Reasoning, text and calls survive the trip out to the client and back into the history."""
    reply = dialect_for(case.path).from_canonical(done, parse_as(case.path, case.body))
    following = canonical(case, case.echo(case.body, json.loads(reply.model_dump_json(exclude_none=True))))
    sent = Message(
        role="assistant",
        parts=(ThinkingPart(text=done.reasoning), TextPart(text=done.text), *done.tool_calls),
    )
    assert following.messages == EXPECTED_MESSAGES + (sent,)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_sse_event_is_one_json_object(case: Case, parse_as, dialect_for, done):
    events = list(dialect_for(case.path).sse_events(done, parse_as(case.path, case.body)))
    assert events
    for event in events:
        if event.data != "[DONE]":
            assert isinstance(json.loads(event.data), dict)
        assert "\n" not in event.data


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sse_transcript_matches_the_golden_file(case: Case, parse_as, dialect_for, done, golden):
    path, body, update = GOLDEN[case.name]
    events = dialect_for(path).sse_events(done.model_copy(update=update), parse_as(path, body))
    golden(f"{case.name}/tool_use.sse", "".join(e.encode().decode() for e in events))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_unknown_session_reaches_the_sdk_as_its_own_401(case: Case, sdk_http: httpx.Client):
    error = case.error(sdk_http)
    assert "unknown session token" in str(error)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_backend_outage_is_a_retryable_5xx_in_the_dialect_format(case: Case, dialect_for):
    status, body = dialect_for(case.path).error_body(
        BackendUnavailable("vLLM at 127.0.0.1:1 refused the connection")
    )
    assert status in (503, 529)
    assert "refused the connection" in body.model_dump_json()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path inside a JSON value (the value itself excluded)."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return []
    return [p for k, v in items for p in [(*prefix, k), *_paths(v, (*prefix, k))]]


def _replaced(body: dict[str, Any], path: tuple[Any, ...], new: Any) -> bytes:
    copy = json.loads(json.dumps(body))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return json.dumps(copy).encode()


def _mutations(case: Case) -> st.SearchStrategy[bytes]:
    """Garbage bytes, arbitrary JSON, and the valid body with any one nested value replaced."""
    paths = _paths(case.body) + [("model",), ("stream",), ("x_unknown",)]
    mutated = st.builds(lambda path, v: _replaced(case.body, path, v), st.sampled_from(paths), _JSON)
    return st.binary(max_size=64) | _JSON.map(lambda v: json.dumps(v).encode()) | mutated


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fuzzed_bodies_never_get_a_5xx(case: Case, dialect_for):
    dialect = dialect_for(case.path)
    params = {"model": "tiny"}

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_mutations(case))
    def check(body: bytes) -> None:
        try:
            dialect.to_canonical(dialect.parse(body, RequestContext(path_params=params), STATE), STATE)
        except OpenEnvError as err:
            status, rendered = dialect.error_body(err)
            assert 400 <= status < 500, (status, rendered)

    check()
