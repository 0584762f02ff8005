"""The oracle policy: solution through the harness's own shell tool, then finish, then final text."""

from __future__ import annotations

import json

from openenv.capture.canonical import CanonicalRequest, Message, TextPart, Tool, ToolCallPart, ToolResultPart
from openenv.capture.parsers.hermes import HermesParser
from openenv.harness.catalog import get_spec
from openenv.harness.oracle import FINAL_TEXT, OraclePolicy
from openenv.harness.tasks import builtin_task

TASK = builtin_task("fix-temperature-conversion")
USER = Message(role="user", parts=(TextPart(text=TASK.instruction),))


def _after_tool_call(request: CanonicalRequest, n: int) -> CanonicalRequest:
    messages = list(request.messages)
    for i in range(n):
        messages.append(Message(role="assistant", parts=(ToolCallPart(id=f"c{i}", name="x"),)))
        messages.append(Message(role="tool", parts=(ToolResultPart(tool_call_id=f"c{i}", content=""),)))
    return request.model_copy(update={"messages": tuple(messages)})


def test_first_reply_is_a_hermes_call_of_the_shell_tool_with_the_solution():
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),))
    parsed = HermesParser().parse(OraclePolicy(get_spec("pi"), TASK).reply(request))
    [call] = parsed.tool_calls
    assert call.name == "bash"
    assert json.loads(call.arguments) == {"command": TASK.solution}


def test_required_arguments_missing_from_the_spec_come_from_the_schema():
    schema = {"type": "object", "required": ["command", "mode", "wait"],
              "properties": {"command": {"type": "string"}, "mode": {"enum": ["sync", "async"]},
                             "wait": {"type": "integer"}}}
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash", parameters=schema),))
    text = OraclePolicy(get_spec("pi"), TASK).reply(request)
    args = json.loads(HermesParser().parse(text).tool_calls[0].arguments)
    assert args == {"command": TASK.solution, "mode": "sync", "wait": 0}


def test_after_the_tool_result_the_oracle_answers_in_text():
    request = _after_tool_call(CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),)), 1)
    assert OraclePolicy(get_spec("pi"), TASK).reply(request) == FINAL_TEXT


def test_mini_swe_agent_gets_its_finish_command_second():
    spec = get_spec("mini-swe-agent")
    request = _after_tool_call(CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),)), 1)
    call = HermesParser().parse(OraclePolicy(spec, TASK).reply(request)).tool_calls[0]
    assert json.loads(call.arguments) == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}


def test_aux_requests_get_plain_text():
    request = CanonicalRequest(messages=(USER,))
    assert "<tool_call>" not in OraclePolicy(get_spec("opencode"), TASK).reply(request, aux=True)


def test_look_first_lists_the_workspace_before_the_solution():
    oracle = OraclePolicy(get_spec("pi"), TASK, look_first=True)
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),))
    calls = [HermesParser().parse(oracle.reply(_after_tool_call(request, n))).tool_calls for n in range(2)]
    assert [json.loads(c[0].arguments)["command"] for c in calls] == ["ls -la", TASK.solution]
    assert oracle.reply(_after_tool_call(request, 2)) == FINAL_TEXT
