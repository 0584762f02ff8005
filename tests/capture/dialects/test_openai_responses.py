"""The OpenAI Responses dialect: Codex's real requests, freeform and namespaced tools, SSE, errors."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest

from openenv.capture.canonical import Completion, Message, ThinkingPart, ToolCallPart, ToolResultPart
from openenv.capture.dialects import RequestContext
from openenv.capture.dialects.openai_responses import OpenAIResponsesDialect
from openenv.capture.dialects.state import DialectState
from openenv.errors import BackendUnavailable

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

D = OpenAIResponsesDialect()
CODEX = ["codex", "codex_after_tool", "codex_gpt55", "codex_gpt55_after_tool"]
PATCH = "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch\n"


def parse(body: dict):
    return D.parse(json.dumps(body).encode(), RequestContext(), STATE)


def canonical(body: dict):
    return D.to_canonical(parse(body), STATE)


def client(http: httpx2.Client) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://proxy/v1", api_key="tok", http_client=http, max_retries=0)


@pytest.mark.parametrize("name", CODEX)
def test_codex_request_streams_back_through_the_sdk(name, harness_request, sdk_http, sdk_kwargs):
    recorded = harness_request(f"openai_responses/{name}")
    assert recorded["path"] == "/v1/responses"
    sdk = client(sdk_http)
    with sdk.responses.stream(**sdk_kwargs(sdk.responses.stream, recorded["body"])) as stream:
        response = stream.get_final_response()
    assert [i.type for i in response.output] == ["reasoning", "message", "function_call"]
    assert json.loads(response.output[2].arguments) == {"command": "cat a.txt"}


def test_developer_messages_are_system_and_the_tool_turn_extends_the_first(harness_request):
    first = canonical(harness_request("openai_responses/codex")["body"])
    second = canonical(harness_request("openai_responses/codex_after_tool")["body"])
    assert [m.role for m in first.messages] == ["system", "system", "user", "user"]
    assert first.system_text().startswith("You are a coding agent running in the Codex CLI")
    assert second.messages[: len(first.messages)] == first.messages
    assert [m.role for m in second.messages[len(first.messages) :]] == ["assistant", "tool"]
    assert second.messages[-1].parts[0].name == "exec_command"


def test_namespace_tools_are_flattened_and_built_ins_are_not_offered(harness_request):
    names = [t.name for t in canonical(harness_request("openai_responses/codex")["body"]).tools]
    assert {"spawn_agent", "wait_agent", "close_agent"} <= set(names)
    assert "multi_agent_v1" not in names
    assert "web_search" not in names and len(names) == 12


def test_freeform_tool_is_offered_with_one_string_input_and_its_grammar(harness_request):
    tools = {t.name: t for t in canonical(harness_request("openai_responses/codex_gpt55")["body"]).tools}
    assert "tool_search" not in tools  # a built-in with client execution: not a function
    patch = tools["apply_patch"].parameters
    assert patch["required"] == ["input"] and patch["properties"]["input"]["type"] == "string"
    assert "begin_patch" in patch["properties"]["input"]["description"]  # the lark grammar travels along


def test_freeform_call_streams_as_custom_tool_call_and_comes_back_as_the_same_call(
    done: Completion, sdk_http
):
    call = ToolCallPart(id="call_9", name="apply_patch", arguments=json.dumps({"input": PATCH}))
    done = done.model_copy(update={"tool_calls": (call,)})
    body = {
        "model": "tiny",
        "input": "Add hi.txt",
        "tools": [
            {
                "type": "custom",
                "name": "apply_patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
            }
        ],
    }
    events = [json.loads(e.data) for e in D.sse_events(done, parse(body))]
    assert "response.custom_tool_call_input.delta" in [e["type"] for e in events]
    item = events[-1]["response"]["output"][-1]
    assert (item["type"], item["call_id"], item["input"]) == ("custom_tool_call", "call_9", PATCH)

    echoed = body | {
        "input": [
            {"role": "user", "content": "Add hi.txt"},
            item,
            {"type": "custom_tool_call_output", "call_id": "call_9", "output": "Done!"},
        ]
    }
    history = canonical(echoed).messages
    assert history[-2] == Message(role="assistant", parts=(call,))
    assert history[-1] == Message(
        role="tool", parts=(ToolResultPart(tool_call_id="call_9", content="Done!", name="apply_patch"),)
    )


def test_call_of_a_namespaced_tool_names_its_namespace(done: Completion):
    body = {
        "model": "tiny",
        "input": "hi",
        "tools": [
            {
                "type": "namespace",
                "name": "multi_agent_v1",
                "tools": [
                    {"type": "function", "name": "bash", "parameters": {"type": "object", "properties": {}}}
                ],
            }
        ],
    }
    (call,) = [i for i in D.from_canonical(done, parse(body)).output if i.type == "function_call"]
    assert (call.name, call.namespace) == ("bash", "multi_agent_v1")


def test_reasoning_item_with_only_a_summary_becomes_thinking():
    body = {
        "model": "tiny",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Greet back."}],
                "encrypted_content": "gAAAA",
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
    }
    assistant = canonical(body).messages[-1]
    assert assistant.parts[0] == ThinkingPart(text="Greet back.", signature="gAAAA")
    assert assistant.text() == "Hello."


def test_tool_output_given_as_parts_is_joined():
    body = {
        "model": "tiny",
        "input": [
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [
                    {"type": "input_text", "text": "line 1\n"},
                    {"type": "input_text", "text": "line 2"},
                ],
            },
        ],
    }
    assert canonical(body).messages[-1].parts[0].content == "line 1\nline 2"


def test_plain_string_input_and_instructions():
    request = canonical({"model": "tiny", "instructions": "Be brief.", "input": "hi", "max_output_tokens": 9})
    assert [(m.role, m.text()) for m in request.messages] == [("system", "Be brief."), ("user", "hi")]
    assert request.sampling.max_tokens == 9


def test_text_format_json_schema_constrains_the_reply():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    text = {
        "format": {"type": "json_schema", "name": "r", "schema": schema, "strict": True},
        "verbosity": "low",
    }
    assert canonical({"model": "tiny", "input": "hi", "text": text}).sampling.json_schema == schema
    assert (
        canonical({"model": "tiny", "input": "hi", "text": {"verbosity": "low"}}).sampling.json_schema is None
    )


def test_previous_response_id_is_refused_in_one_line():
    from openenv.errors import Unsupported

    with pytest.raises(Unsupported, match="send the whole conversation"):
        canonical({"model": "tiny", "input": "go on", "previous_response_id": "resp_1"})


def test_sse_sequence_numbers_count_from_zero(done: Completion):
    """Every event carries its `sequence_number`, 0, 1, 2, ... (the golden transcript of every dialect is
    checked in test_contract.py)."""
    req = parse({"model": "tiny", "input": "hi", "stream": True})
    events = list(D.sse_events(done, req))
    assert [json.loads(e.data)["sequence_number"] for e in events] == list(range(len(events)))


def test_length_finish_is_an_incomplete_response(done: Completion):
    cut = done.model_copy(update={"tool_calls": (), "finish_reason": "length"})
    req = parse({"model": "tiny", "input": "hi", "max_output_tokens": 3})
    reply = D.from_canonical(cut, req)
    assert (reply.status, reply.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert list(D.sse_events(cut, req))[-1].event == "response.incomplete"


def test_backend_outage_reaches_the_sdk_as_a_retryable_503():
    def down(request: httpx2.Request) -> httpx2.Response:
        status, body = D.error_body(BackendUnavailable("vLLM is not answering"))
        return httpx2.Response(status, content=body.model_dump_json())

    with pytest.raises(openai.InternalServerError) as info:
        client(httpx2.Client(transport=httpx2.MockTransport(down))).responses.create(model="m", input="hi")
    assert info.value.status_code == 503
    assert info.value.body["message"] == "vLLM is not answering"


def test_bad_body_is_an_openai_invalid_request_error():
    from openenv.errors import BadRequest

    with pytest.raises(BadRequest) as info:
        D.parse(b'{"model": "m", "input": [{"type": "function_call", "name": "f"}]}', RequestContext(), STATE)
    status, body = D.error_body(info.value)
    assert status == 400
    assert body.model_dump()["error"]["type"] == "invalid_request_error"
    assert "call_id" in body.model_dump()["error"]["message"]
