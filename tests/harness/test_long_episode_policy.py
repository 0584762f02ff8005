"""The `long` policy's plan, read off the conversation (fast; the real harnesses run in tests/harness/long/)."""

from __future__ import annotations

import json

from openenv.capture.canonical import CanonicalRequest, Message, TextPart, Tool, ToolCallPart, ToolResultPart
from openenv.harness.catalog import get_spec
from openenv.harness.long_episode import GIVE_UP_TEXT, SUB_AGENT_PROMPT, SUMMARY_MARK, LongEpisodePolicy
from openenv.harness.oracle import FINAL_TEXT, solution_command
from openenv.harness.tasks import builtin_task

SPEC = get_spec("claude-code")
TOOLS = (Tool(name="Bash"), Tool(name="Agent"))
TASK = builtin_task("fix-deep-merge")


def text(role: str, body: str) -> Message:
    return Message(role=role, parts=(TextPart(text=body),))


def call(name: str, **arguments: object) -> Message:
    return Message(
        role="assistant", parts=(ToolCallPart(id=name, name=name, arguments=json.dumps(arguments)),)
    )


def result(content: str = "ok") -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id="x", content=content),))


def policy(solve: bool = True) -> LongEpisodePolicy:
    assert SPEC.long_episode is not None
    return LongEpisodePolicy(SPEC.long_variant(), SPEC.long_episode, TASK, solve=solve)


def reply(messages: list[Message], tools: tuple[Tool, ...] = TOOLS, solve: bool = True) -> str:
    return policy(solve).reply(CanonicalRequest(messages=tuple(messages), tools=tools))


def called(reply_text: str) -> tuple[str, dict[str, object]]:
    body = json.loads(reply_text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
    return body["name"], body["arguments"]


def test_the_main_conversation_starts_the_sub_agent_in_the_foreground_then_fills_the_context():
    start = [text("system", "You are a coding agent."), text("user", TASK.instruction)]
    name, arguments = called(reply(start))
    assert (
        name == "Agent"
        and arguments["prompt"] == SUB_AGENT_PROMPT
        and arguments["run_in_background"] is False
    )
    after = [*start, call("Agent", prompt=SUB_AGENT_PROMPT), result("files listed")]
    assert called(reply(after)) == ("Bash", {"command": "seq 1 300", "description": "Apply the change"})


def test_the_sub_agent_lists_the_workspace_then_reports():
    sub = [text("system", "You are a sub-agent."), text("user", SUB_AGENT_PROMPT)]
    assert called(reply(sub))[1]["command"] == "ls"
    assert "<tool_call>" not in reply([*sub, call("Bash", command="ls"), result("config.py")])


def test_a_summary_request_gets_a_tagged_summary_even_though_its_history_quotes_the_sub_agent_task():
    # OpenCode's shape: the whole conversation quoted in the summary request's one user message.
    history = [
        text(
            "user",
            f"<conversation>{TASK.instruction}\nAgent({SUB_AGENT_PROMPT})</conversation>\n"
            "CRITICAL: Respond with TEXT ONLY. Summarize.",
        )
    ]
    answer = reply(history)
    assert SUMMARY_MARK in answer and "<summary>" in answer and "<tool_call>" not in answer


def test_after_the_compaction_the_solution_runs_once_then_the_final_answer_or_it_gives_up():
    resumed = [text("system", "You are a coding agent."), text("user", f"continued: {SUMMARY_MARK} ...")]
    assert called(reply(resumed))[1]["command"] == solution_command(TASK)
    done = [*resumed, call("Bash", command=solution_command(TASK)), result()]
    assert reply(done) == FINAL_TEXT
    assert reply(resumed, solve=False) == GIVE_UP_TEXT


def test_it_stops_filling_when_the_harness_never_compacts():
    fills = [m for _ in range(6) for m in (call("Bash", command="seq 1 300"), result())]
    start = [text("user", TASK.instruction), call("Agent", prompt=SUB_AGENT_PROMPT), result(), *fills]
    assert reply(start) == GIVE_UP_TEXT
