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


def _terminus_keystrokes(reply: str) -> str:
    """What Terminus-2 would type for a reply: the one command's keystrokes, from its JSON."""
    body = json.loads(reply)
    assert body["task_complete"] is False and "<tool_call>" not in reply
    [command] = body["commands"]
    return command["keystrokes"]


def test_terminus_gets_each_step_as_the_keystrokes_of_one_json_reply():
    import base64

    spec, request = get_spec("terminus-2"), CanonicalRequest(messages=(USER,))
    oracle = OraclePolicy(spec, TASK, look_first=True)
    assert _terminus_keystrokes(oracle.reply(request)) == "ls -la\n"
    after_one = request.model_copy(update={"messages": (USER, Message(role="assistant", parts=(
        TextPart(text="{}"),)), USER)})
    typed = _terminus_keystrokes(oracle.reply(after_one))
    assert typed.endswith(" | base64 -d | sh\n") and "\n" not in typed[:-1], "a script is typed as one line"
    assert base64.b64decode(typed.split()[1]).decode() == TASK.solution


def test_terminus_ends_with_task_complete_and_confirms_it_when_asked_again():
    spec = get_spec("terminus-2")
    replies = (Message(role="assistant", parts=(TextPart(text="{}"),)), USER)
    for done in (1, 2):  # the plan's one step done; then Terminus-2 asks "are you sure?"
        request = CanonicalRequest(messages=(USER, *replies * done))
        assert json.loads(OraclePolicy(spec, TASK).reply(request)) == {
            "analysis": "The fix is applied.", "plan": "Nothing left to do.", "commands": [],
            "task_complete": True}


def test_gptme_gets_its_finish_tool_called_after_the_plan():
    spec = get_spec("gptme")
    request = _after_tool_call(CanonicalRequest(messages=(USER,), tools=(Tool(name="shell"), Tool(name="complete"))), 1)
    [call] = HermesParser().parse(OraclePolicy(spec, TASK).reply(request)).tool_calls
    assert call.name == "complete" and json.loads(call.arguments) == {}
    assert OraclePolicy(spec, TASK).reply(_after_tool_call(request, 1)) == FINAL_TEXT
