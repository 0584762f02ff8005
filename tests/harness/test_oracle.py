"""The oracle policy: solution through the harness's own shell tool, then finish, then final text."""

from __future__ import annotations

import json

from openenv.capture.canonical import CanonicalRequest, Message, TextPart, Tool, ToolCallPart, ToolResultPart
from openenv.capture.parsers.hermes import HermesParser
from openenv.harness.catalog import get_spec
from openenv.harness.oracle import FINAL_TEXT, OraclePolicy, solution_command
from openenv.harness.tasks import builtin_task

TASK = builtin_task("fix-temperature-conversion")
# Harbor's oracle: solution/ staged at /solution, solve.sh run by bash (in the workdir, where shell tools run).
RUN_SOLUTION = "bash /solution/solve.sh"
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
    assert json.loads(call.arguments) == {"command": RUN_SOLUTION}


def test_required_arguments_missing_from_the_spec_come_from_the_schema():
    schema = {
        "type": "object",
        "required": ["command", "mode", "wait"],
        "properties": {
            "command": {"type": "string"},
            "mode": {"enum": ["sync", "async"]},
            "wait": {"type": "integer"},
        },
    }
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash", parameters=schema),))
    text = OraclePolicy(get_spec("pi"), TASK).reply(request)
    args = json.loads(HermesParser().parse(text).tool_calls[0].arguments)
    assert args == {"command": RUN_SOLUTION, "mode": "sync", "wait": 0}


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
    assert [json.loads(c[0].arguments)["command"] for c in calls] == ["ls -la", RUN_SOLUTION]
    assert oracle.reply(_after_tool_call(request, 2)) == FINAL_TEXT


def test_look_after_lists_the_workspace_right_after_the_solution():
    """The shaping stage's harmless extra call: the same listing, once the solution has run."""
    oracle = OraclePolicy(get_spec("pi"), TASK, look_after=True)
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),))
    calls = [HermesParser().parse(oracle.reply(_after_tool_call(request, n))).tool_calls for n in range(2)]
    assert [json.loads(c[0].arguments)["command"] for c in calls] == [RUN_SOLUTION, "ls -la"]
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
    after_one = request.model_copy(
        update={"messages": (USER, Message(role="assistant", parts=(TextPart(text="{}"),)), USER)}
    )
    assert _terminus_keystrokes(oracle.reply(after_one)) == RUN_SOLUTION + "\n"
    unstaged = OraclePolicy(spec, TASK, look_first=True, staged=False)
    typed = _terminus_keystrokes(unstaged.reply(after_one))
    assert "\n" not in typed[:-1], "a script is typed as one line"
    assert base64.b64decode(typed.split("echo ")[1].split()[0]).decode() == TASK.solution


def test_terminus_ends_with_task_complete_and_confirms_it_when_asked_again():
    spec = get_spec("terminus-2")
    replies = (Message(role="assistant", parts=(TextPart(text="{}"),)), USER)
    for done in (1, 2):  # the plan's one step done; then Terminus-2 asks "are you sure?"
        request = CanonicalRequest(messages=(USER, *replies * done))
        assert json.loads(OraclePolicy(spec, TASK).reply(request)) == {
            "analysis": "The fix is applied.",
            "plan": "Nothing left to do.",
            "commands": [],
            "task_complete": True,
        }


def test_gptme_gets_its_finish_tool_called_after_the_plan():
    spec = get_spec("gptme")
    request = _after_tool_call(
        CanonicalRequest(messages=(USER,), tools=(Tool(name="shell"), Tool(name="complete"))), 1
    )
    [call] = HermesParser().parse(OraclePolicy(spec, TASK).reply(request)).tool_calls
    assert call.name == "complete" and json.loads(call.arguments) == {}
    assert OraclePolicy(spec, TASK).reply(_after_tool_call(request, 1)) == FINAL_TEXT


def test_every_harness_gets_one_short_line_that_runs_bash_on_the_staged_script():
    """The same command for every harness, whatever its shell tool: no script text, no newline, no `$()` or
    backticks (gemini-cli), one command root (qwen-code), no leading `cd ` (grok-cli takes the rest as a
    folder), nothing a persistent shell could `exit` (openhands, terminus-2)."""
    from openenv.harness.catalog import harness_names

    for name in harness_names():
        spec = get_spec(name)
        request = CanonicalRequest(messages=(USER,), tools=(Tool(name=spec.shell_tool.name),))
        if (
            spec.edit_format is not None
        ):  # aider: edit blocks, then the look in a ```bash block (test_edit_blocks)
            continue
        reply = OraclePolicy(spec, TASK).reply(request)
        if spec.shell_tool.in_text:
            assert _terminus_keystrokes(reply) == RUN_SOLUTION + "\n", name
            continue
        [call] = HermesParser().parse(reply).tool_calls
        assert call.name == spec.shell_tool.name, name
        arguments = json.dumps(json.loads(call.arguments))
        assert json.loads(arguments)[next(iter(spec.shell_tool.arguments))] in (
            RUN_SOLUTION,
            [RUN_SOLUTION],
        ), name
        assert TASK.solution.strip() not in arguments, name


def test_solution_env_comes_from_the_task():
    task = TASK.model_copy(
        update={"workdir": "/workspace", "solution_env": {"GREETING": "hello world", "N": "3"}}
    )
    assert solution_command(task) == "env GREETING='hello world' N=3 bash /solution/solve.sh"


def test_unstaged_form_writes_solve_sh_from_one_base64_line_and_runs_it_with_bash():
    import base64
    import subprocess

    task = TASK.model_copy(
        update={
            "solution": '#!/bin/bash\nset -euo pipefail\nx=(a b)\n[[ ${#x[@]} == 2 ]] && echo "$N ok"\n',
            "solution_env": {"N": "2"},
        }
    )
    command = solution_command(task, staged=False)
    assert (
        "\n" not in command
        and base64.b64decode(command.split("echo ")[1].split()[0]).decode() == task.solution
    )
    ran = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout) == (0, "2 ok\n"), ran.stderr
    failing = task.model_copy(update={"solution": "#!/bin/sh\nexit 7\n"})
    assert subprocess.run(["/bin/sh", "-c", solution_command(failing, staged=False)]).returncode == 7


def test_concurrent_unstaged_solutions_each_run_whole_and_write_no_file(tmp_path):
    # On a shared /tmp (no isolation; the benchmark's floor) episodes of one task wrote one script file,
    # and a second episode's write truncated the script the first was running: it exited 0, nothing done.
    import glob
    import subprocess

    task = TASK.model_copy(update={"solution": '#!/bin/sh\nsleep 0.3\necho "$0 ran" >> "$OUT"\n'})
    command = solution_command(task, staged=False)
    before = set(glob.glob("/tmp/openenv-solve-*"))
    out = tmp_path / "ran"
    procs = [
        subprocess.Popen(["/bin/sh", "-c", command], env={"PATH": "/usr/bin:/bin", "OUT": str(out)})
        for _ in range(3)
    ]
    assert [p.wait(30) for p in procs] == [0, 0, 0]
    assert out.read_text() == "solve.sh ran\n" * 3
    assert set(glob.glob("/tmp/openenv-solve-*")) == before


def test_an_unstaged_solution_with_more_files_than_solve_sh_is_refused():
    import pytest

    from openenv.errors import BadRequest

    task = TASK.model_copy(update={"solution_files": {"solve.sh": TASK.solution or "", "patch.diff": "x"}})
    with pytest.raises(BadRequest, match="stage_solution"):
        solution_command(task, staged=False)
    assert solution_command(task).endswith("bash /solution/solve.sh")


def test_a_demonstration_sends_the_solutions_own_commands_not_a_script_only_the_oracle_has():
    """`--policy demo` records what a model is trained on: `bash /solution/solve.sh` would teach it to call a
    script that is staged only in the oracle's episodes."""
    import pytest

    from openenv.errors import BadRequest
    from openenv.harness.oracle import demonstration_command

    task = TASK.model_copy(
        update={"solution": "#!/bin/bash\n# append the word\necho lemon >> data.md\n", "solution_files": {}}
    )
    request = CanonicalRequest(messages=(USER,), tools=(Tool(name="bash"),))
    [call] = (
        HermesParser().parse(OraclePolicy(get_spec("pi"), task, demonstrate=True).reply(request)).tool_calls
    )
    assert json.loads(call.arguments) == {"command": "echo lemon >> data.md"}
    with_env = task.model_copy(update={"solution_env": {"N": "3"}})
    assert demonstration_command(with_env) == "env N=3 echo lemon >> data.md"
    two = with_env.model_copy(update={"solution": "cd src\nmake\n"})
    assert demonstration_command(two) == "export N=3\ncd src\nmake"
    with pytest.raises(BadRequest, match="more files than solve.sh"):
        demonstration_command(
            task.model_copy(update={"solution_files": {"solve.sh": "x", "patch.diff": "y"}})
        )
    with pytest.raises(BadRequest, match="no command"):
        demonstration_command(task.model_copy(update={"solution": "#!/bin/sh\n\n# nothing\n"}))
