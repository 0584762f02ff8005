"""The Gemini dialect: Gemini CLI's real requests, id-less calls, schemas, thoughts, SSE, errors."""

from __future__ import annotations

import json

import httpx2
import pytest
from google import genai
from google.genai import errors
from google.genai import types as gtypes

from openenv.capture.canonical import (
    Completion,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from openenv.capture.dialects import RequestContext
from openenv.capture.dialects.gemini import GeminiDialect
from openenv.capture.dialects.state import DialectState
from openenv.errors import BackendUnavailable, Unsupported

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

D = GeminiDialect()
CTX = RequestContext(path_params={"model": "gemini-2.5-pro"})


def canonical(body: dict, stream: bool = False):
    return GeminiDialect(stream=stream).to_canonical(
        GeminiDialect(stream=stream).parse(json.dumps(body).encode(), CTX, STATE),
        STATE,
    )


def client(http: httpx2.Client, key: str = "tok") -> genai.Client:
    options = gtypes.HttpOptions(
        base_url="http://proxy",
        api_version="v1beta",
        httpx_client=http,
        retry_options=gtypes.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=key, http_options=options)


def sdk_args(body: dict) -> dict:
    """A recorded body as google-genai arguments (the SDK writes the same wire body back)."""
    config = {
        **body.get("generationConfig", {}),
        "systemInstruction": body.get("systemInstruction"),
        "tools": body.get("tools"),
        "automaticFunctionCalling": {"disable": True},
    }
    return {
        "contents": [gtypes.Content.model_validate(c) for c in body["contents"]],
        "config": gtypes.GenerateContentConfig.model_validate(config),
    }


@pytest.mark.parametrize("name", ["gemini_cli", "gemini_cli_after_tool", "gemini_cli_router_main"])
def test_gemini_cli_main_request_streams_back_through_the_sdk(name, harness_request, sdk_http):
    recorded = harness_request(f"gemini/{name}")
    assert recorded["path"].endswith(":streamGenerateContent?alt=sse")
    chunks = list(
        client(sdk_http).models.generate_content_stream(model="gemini-2.5-pro", **sdk_args(recorded["body"]))
    )
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert [p.function_call.name for p in parts if p.function_call] == ["bash"]
    assert chunks[-1].candidates[0].finish_reason == gtypes.FinishReason.STOP
    assert chunks[-1].usage_metadata.prompt_token_count == 42


def test_gemini_cli_router_request_is_answered_through_the_sdk(harness_request, sdk_http):
    recorded = harness_request("gemini/gemini_cli_router")
    assert recorded["path"] == "/v1beta/models/gemini-3.5-flash-lite:generateContent"
    reply = client(sdk_http).models.generate_content(
        model="gemini-3.5-flash-lite", **sdk_args(recorded["body"])
    )
    assert reply.text == "Reading it."


def test_tool_turn_extends_the_first_and_keeps_the_cli_call_id(harness_request):
    first = canonical(harness_request("gemini/gemini_cli")["body"], stream=True)
    second = canonical(harness_request("gemini/gemini_cli_after_tool")["body"], stream=True)
    assert second.messages[: len(first.messages)] == first.messages
    call, result = second.messages[-2].parts[0], second.messages[-1].parts[0]
    assert call.id == result.tool_call_id == "run_shell_command_1795938294401_0"
    assert result.content.startswith("<untrusted_context>\nOutput: (empty)")
    assert len(first.tools) == 16


def test_calls_without_ids_pair_with_responses_by_name_in_order():
    """Pi sends functionCall / functionResponse without ids."""
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "Two reads."}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "read", "args": {"path": "a"}}},
                    {"functionCall": {"name": "read", "args": {"path": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "read", "response": {"output": "A"}}},
                    {"functionResponse": {"name": "read", "response": {"error": "no b"}}},
                ],
            },
        ]
    }
    messages = canonical(body).messages
    calls = messages[1].tool_calls()
    results = [m.parts[0] for m in messages[2:]]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert len({c.id for c in calls}) == 2
    assert [(r.content, r.is_error) for r in results] == [("A", False), ("no b", True)]


def test_thought_parts_and_signatures_map_to_thinking():
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Plan.", "thought": True, "thoughtSignature": "c2ln"},
                    {"text": "Hello."},
                    {
                        "functionCall": {"id": "c1", "name": "f", "args": {}},
                        "thoughtSignature": "skip_thought_signature_validator",
                    },
                ],
            },
        ]
    }
    assert canonical(body).messages[-1] == Message(
        role="assistant",
        parts=(
            ThinkingPart(text="Plan.", signature="c2ln"),
            TextPart(text="Hello."),
            ToolCallPart(id="c1", name="f", arguments="{}"),
        ),
    )


def test_a_streamed_reply_echoed_chunk_by_chunk_is_one_text_part():
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Pl", "thought": True},
                    {"text": "an.", "thought": True},
                    {"text": "Hel"},
                    {"text": "lo."},
                ],
            },
        ]
    }
    assert canonical(body).messages[-1] == Message(
        role="assistant", parts=(ThinkingPart(text="Plan."), TextPart(text="Hello."))
    )


def test_openapi_parameters_are_normalized_to_json_schema_and_snake_case_is_accepted():
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [
            {
                "function_declarations": [
                    {
                        "name": "f",
                        "parameters": {
                            "type": "OBJECT",
                            "properties": {
                                "n": {"type": "INTEGER"},
                                "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
                            },
                        },
                    }
                ]
            },
            {"googleSearch": {}},
        ],
    }
    (tool,) = canonical(body).tools
    assert tool.parameters == {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    }


@pytest.mark.parametrize(
    ("config", "mode", "name"),
    [
        ({"mode": "AUTO"}, "auto", None),
        ({"mode": "NONE"}, "none", None),
        ({"mode": "ANY"}, "required", None),
        ({"mode": "ANY", "allowedFunctionNames": ["f"]}, "named", "f"),
    ],
)
def test_function_calling_modes(config, mode, name):
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "toolConfig": {"functionCallingConfig": config},
    }
    choice = canonical(body).tool_choice
    assert (choice.mode, choice.name) == (mode, name)


def test_generation_config_maps_to_sampling():
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {
            "temperature": 0.5,
            "topP": 0.9,
            "topK": 40,
            "maxOutputTokens": 7,
            "stopSequences": ["END"],
            "seed": 3,
        },
    }
    s = canonical(body).sampling
    assert (s.temperature, s.top_p, s.top_k, s.max_tokens, s.stop, s.seed) == (0.5, 0.9, 40, 7, ("END",), 3)


def test_router_json_schema_becomes_a_json_schema_constraint(harness_request):
    """Gemini CLI's router needs schema-valid JSON back; the schema travels to the backend."""
    sampling = canonical(harness_request("gemini/gemini_cli_router")["body"]).sampling
    assert sampling.json_schema == {
        "type": "object",
        "required": ["complexity_reasoning", "complexity_score"],
        "properties": {
            "complexity_reasoning": {"type": "string", "description": "Brief explanation for the score."},
            "complexity_score": {"type": "integer", "description": "Complexity score from 1-100."},
        },
    }
    assert canonical(harness_request("gemini/gemini_cli")["body"]).sampling.json_schema is None


def test_two_candidates_are_refused_with_invalid_argument():
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"candidateCount": 2},
    }
    with pytest.raises(Unsupported) as info:
        canonical(body)
    status, error = D.error_body(info.value)
    assert (status, error.model_dump()["error"]["status"]) == (400, "INVALID_ARGUMENT")


def test_count_tokens_accepts_a_wrapped_generate_content_request(sdk_http):
    body = {
        "generateContentRequest": {
            "model": "models/m",
            "contents": [{"role": "user", "parts": [{"text": "a"}]}],
        }
    }
    assert len(canonical(body).messages) == 1
    assert client(sdk_http).models.count_tokens(model="m", contents="hi").total_tokens == 1


def test_sse_frames_carry_no_event_names(done: Completion):
    """Gemini's SSE is `data:` lines only (the golden transcript of every dialect is in test_contract.py)."""
    req = GeminiDialect(stream=True).parse(
        b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}',
        CTX,
        STATE,
    )
    events = list(D.sse_events(done, req))
    assert events and all(e.event is None for e in events)


@pytest.mark.parametrize(
    "ctx", [RequestContext(headers={"x-goog-api-key": "tok"}), RequestContext(query={"key": "tok"})]
)
def test_session_token_comes_from_the_api_key_header_or_query(ctx):
    assert D.session_token(ctx) == "tok"


def test_unknown_key_reaches_the_sdk_as_unauthenticated(sdk_http):
    with pytest.raises(errors.ClientError) as info:
        client(sdk_http, key="wrong").models.generate_content(model="m", contents="hi")
    assert (info.value.code, info.value.status) == (401, "UNAUTHENTICATED")


def test_backend_outage_reaches_the_sdk_as_503_unavailable():
    def down(request: httpx2.Request) -> httpx2.Response:
        status, body = D.error_body(BackendUnavailable("vLLM is not answering"))
        return httpx2.Response(status, content=body.model_dump_json())

    with pytest.raises(errors.ServerError) as info:
        client(httpx2.Client(transport=httpx2.MockTransport(down))).models.generate_content(
            model="m", contents="x"
        )
    assert (info.value.code, info.value.status, info.value.message) == (
        503,
        "UNAVAILABLE",
        "vLLM is not answering",
    )
