"""The Anthropic Messages dialect: Claude Code's real requests, its quirks, the SSE grammar, errors."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest

from openenv.capture.canonical import (
    Completion,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from openenv.capture.dialects import RequestContext
from openenv.capture.dialects.anthropic import AnthropicDialect
from openenv.capture.dialects.state import DialectState
from openenv.errors import BackendUnavailable, Unsupported

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

D = AnthropicDialect()
CLAUDE_CODE = ["claude_code", "claude_code_after_tool", "claude_code_bare", "claude_code_bare_after_tool"]


def canonical(body: dict):
    return D.to_canonical(D.parse(json.dumps(body).encode(), RequestContext(), STATE), STATE)


def client(http: httpx2.Client, key: str = "tok") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url="http://proxy", api_key=key, http_client=http, max_retries=0)


@pytest.mark.parametrize("name", CLAUDE_CODE)
def test_claude_code_request_streams_back_through_the_sdk(name, harness_request, sdk_http, sdk_kwargs):
    """The recorded body goes out through the SDK's streaming helper unchanged (unknown fields in
    extra_body) and our SSE accumulates into a tool_use message."""
    recorded = harness_request(f"anthropic/{name}")
    assert recorded["path"] == "/v1/messages?beta=true"
    sdk = client(sdk_http)
    with sdk.messages.stream(**sdk_kwargs(sdk.messages.stream, recorded["body"])) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[2].input == {"command": "cat a.txt"}


def test_billing_header_is_dropped_so_the_second_turn_extends_the_first(harness_request):
    first = canonical(harness_request("anthropic/claude_code")["body"])
    second = canonical(harness_request("anthropic/claude_code_after_tool")["body"])
    assert "x-anthropic-billing-header" not in first.system_text()
    assert first.system_text().startswith("You are a Claude agent")
    assert second.messages[: len(first.messages)] == first.messages


def test_billing_header_line_is_dropped_from_a_string_system_prompt():
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "system": "x-anthropic-billing-header: cc_version=2.1.332.efc; cch=9f1e2;\nYou are Claude Code.",
    }
    assert canonical(body).messages[0] == Message(
        role="system", parts=(TextPart(text="You are Claude Code."),)
    )


def test_system_message_inside_messages_keeps_its_place(harness_request):
    """Claude Code's `-p` mode sends [user, system(environment)] with the per-turn-control beta."""
    roles = [m.role for m in canonical(harness_request("anthropic/claude_code")["body"]).messages]
    assert roles == ["system", "user", "system"]


def test_empty_system_message_between_turns_is_skipped(harness_request):
    body = harness_request("anthropic/claude_code_bare_after_tool")["body"]
    assert {"role": "system", "content": []} == {k: body["messages"][1][k] for k in ("role", "content")}
    assert [m.role for m in canonical(body).messages] == ["system", "user", "assistant", "tool"]


def test_tool_result_keeps_its_call_id_name_and_error_flag(harness_request):
    tool = canonical(harness_request("anthropic/claude_code_bare_after_tool")["body"]).messages[-1]
    assert tool == Message(
        role="tool",
        parts=(
            ToolResultPart(tool_call_id="toolu_01", name="Bash", content="(Bash completed with no output)"),
        ),
    )


def test_deferred_and_server_tools_are_not_offered(harness_request):
    body = harness_request("anthropic/claude_code")["body"]
    body["tools"].append({"type": "web_search_20250305", "name": "web_search", "max_uses": 3})
    names = [t.name for t in canonical(body).tools]
    assert "DeferredToolPlaceholder" not in names
    assert "web_search" not in names
    assert {"Bash", "Edit", "Read", "Write", "ToolSearch"} <= set(names)


def test_block_contents_thinking_and_error_results_map_to_canonical_parts():
    body = {
        "model": "m",
        "max_tokens": 8,
        "system": [{"type": "text", "text": "Sys.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Go."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Plan.", "signature": "sig=="},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "false"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "exit 1"},
                            {"type": "text", "text": "stderr: no"},
                        ],
                    },
                    {"type": "text", "text": "Try again."},
                ],
            },
        ],
    }
    assert canonical(body).messages == (
        Message(role="system", parts=(TextPart(text="Sys."),)),
        Message(role="user", parts=(TextPart(text="Go."),)),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="Plan.", signature="sig=="),
                ToolCallPart(id="t1", name="Bash", arguments='{"command": "false"}'),
            ),
        ),
        Message(
            role="tool",
            parts=(
                ToolResultPart(tool_call_id="t1", name="Bash", content="exit 1\nstderr: no", is_error=True),
            ),
        ),
        Message(role="user", parts=(TextPart(text="Try again."),)),
    )


@pytest.mark.parametrize(
    ("choice", "mode", "name"),
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any"}, "required", None),
        ({"type": "none"}, "none", None),
        ({"type": "tool", "name": "Bash"}, "named", "Bash"),
    ],
)
def test_tool_choice(choice, mode, name):
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "tool_choice": choice,
    }
    assert (canonical(body).tool_choice.mode, canonical(body).tool_choice.name) == (mode, name)


def test_output_config_json_schema_constrains_the_reply_and_effort_is_ignored():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": schema}},
    }
    assert canonical(body).sampling.json_schema == schema
    assert canonical(body | {"output_config": {"effort": "medium"}}).sampling.json_schema is None


def test_forced_tool_without_a_name_is_a_bad_request():
    from openenv.errors import BadRequest

    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "tool_choice": {"type": "tool"},
    }
    with pytest.raises(BadRequest, match="needs the name of the tool"):
        canonical(body)


def test_image_block_is_refused_with_an_invalid_request_error():
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
                ],
            }
        ],
    }
    with pytest.raises(Unsupported) as info:
        canonical(body)
    status, error = D.error_body(info.value)
    assert status == 400
    assert error.model_dump() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": info.value.message},
    }


def test_sse_events_are_named_after_their_data_type(done: Completion):
    """Anthropic frames carry `event: <type>` equal to the JSON's `type` (the golden transcript of every
    dialect is checked in test_contract.py)."""
    req = D.parse(
        b'{"model": "tiny", "max_tokens": 64, "stream": true, "messages": [{"role": "user", '
        b'"content": "hi"}]}',
        RequestContext(),
        STATE,
    )
    events = list(D.sse_events(done, req))
    assert events and all(e.event == json.loads(e.data)["type"] for e in events)


def test_max_tokens_finish_is_reported_as_max_tokens(done: Completion):
    cut = done.model_copy(update={"tool_calls": (), "finish_reason": "length"})
    req = D.parse(
        b'{"model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}',
        RequestContext(),
        STATE,
    )
    assert D.from_canonical(cut, req).stop_reason == "max_tokens"


def test_backend_outage_reaches_the_sdk_as_overloaded_529():
    def down(request: httpx2.Request) -> httpx2.Response:
        status, body = D.error_body(BackendUnavailable("vLLM is not answering"))
        return httpx2.Response(status, content=body.model_dump_json())

    with pytest.raises(anthropic.OverloadedError) as info:
        client(httpx2.Client(transport=httpx2.MockTransport(down))).messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 529
    assert info.value.body["error"] == {"type": "overloaded_error", "message": "vLLM is not answering"}


def test_count_tokens_is_answered_through_the_sdk(sdk_http):
    count = client(sdk_http).messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "hi"}], system="Be brief."
    )
    assert count.input_tokens == 2  # the stand-in counts canonical messages; the app uses the tokenizer


@pytest.mark.parametrize("headers", [{"x-api-key": "tok"}, {"authorization": "Bearer tok"}])
def test_session_token_comes_from_x_api_key_or_bearer(headers):
    assert D.session_token(RequestContext(headers=headers)) == "tok"
