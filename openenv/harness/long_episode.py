"""The `long` policy: drives a real harness through the branches of a long episode, then solves the task.

A scripted policy in the oracle's mould (hermes tool calls through the harness's own tools, a plan read
off the conversation, so it is stateless and safe to retry), for the episodes that leave one linear
sequence behind: with the harness started as its spec's `long_episode` recipe says (a sub-agent tool, an
early compaction threshold), it

1. calls the harness's sub-agent tool once (Claude Code's Agent, OpenCode's task), whose conversation
   lists the workspace and reports back;
2. fills the context with a shell command's output until the harness compacts its history;
3. answers the harness's summary request with a summary;
4. in the compacted conversation, runs the task's solution (or, with `solve=False`, gives up) and ends
   with a final text answer.

Every reply goes through the proxy as a `complete` action, so each is tokenized, scored by the model
and recorded like a sampled turn: the branches are the harness's own, the tokens are the policy's.
"""

from __future__ import annotations

import json
import string

from openenv.capture.canonical import CanonicalRequest, Message
from openenv.harness.oracle import FINAL_TEXT, fill_required, hermes_tool_call, solution_command
from openenv.harness.spec import HarnessSpec, LongEpisode
from openenv.harness.tasks.model import Task

__all__ = ["GIVE_UP_TEXT", "SUB_AGENT_PROMPT", "SUMMARY_MARK", "LongEpisodePolicy"]

SUB_AGENT_PROMPT = "Sub-agent task: list the files of the workspace with ls and report them."
SUB_AGENT_REPORT = "The workspace holds the task's files."
SUMMARY_MARK = "Summary of the work so far:"
GIVE_UP_TEXT = "I could not fix it."
FILL_COMMAND = "seq 1 300"
AUX_TEXT = "Fix the task"


def _text(message: Message) -> str:
    return "".join(getattr(part, "text", None) or getattr(part, "content", "") for part in message.parts)


def _calls(request: CanonicalRequest) -> list[tuple[str, dict[str, object]]]:
    """Every tool call the conversation holds, with its parsed arguments ({} where they do not parse)."""
    calls = []
    for message in request.messages:
        for part in message.parts:
            if part.type == "tool_call":
                try:
                    arguments = json.loads(part.arguments)
                except ValueError:
                    arguments = {}
                calls.append((part.name, arguments if isinstance(arguments, dict) else {}))
    return calls


class LongEpisodePolicy:
    """Replies that take `spec`'s harness through a sub-agent and a compaction, then (with `solve`) run
    `task`'s solution; `spec` is the harness as its recipe starts it (`HarnessSpec.long_variant`).

    Args:
        spec: the harness spec whose `shell_tool` the calls use.
        recipe: the harness's `long_episode` recipe (sub-agent tool, summary-request markers).
        task: the task whose solution runs after the compaction.
        solve: run the solution (reward 1) or give up after the compaction (reward 0), for a GRPO group
            with a reward spread.
        max_fills: shell calls that fill the context before the policy stops waiting for a compaction.
    """

    def __init__(
        self, spec: HarnessSpec, recipe: LongEpisode, task: Task, *, solve: bool = True, max_fills: int = 6
    ) -> None:
        self.spec = spec
        self.recipe = recipe
        self.solution = solution_command(task)
        self.solve = solve
        self.max_fills = max_fills

    def _shell(self, request: CanonicalRequest, command: str) -> str:
        shell = self.spec.shell_tool
        tool = next((t for t in request.tools if t.name == shell.name), None)
        return hermes_tool_call(shell.name, fill_required(shell.call_arguments(command), tool))

    def _ran(self, request: CanonicalRequest, command: str) -> int:
        return sum(
            command in arguments.values()
            for name, arguments in _calls(request)
            if name == self.spec.shell_tool.name
        )

    def is_summary_request(self, request: CanonicalRequest) -> bool:
        """The harness asks for a summary of its history (its compaction's first request)."""
        users = [m for m in request.messages if m.role == "user"]
        texts = [_text(m) for m in request.messages if m.role == "system"] + [_text(users[-1])] * bool(users)
        return any(mark in text for mark in self.recipe.summarizer for text in texts)

    @staticmethod
    def is_sub_agent(request: CanonicalRequest) -> bool:
        users = [m for m in request.messages if m.role == "user"]
        return bool(users) and SUB_AGENT_PROMPT in _text(users[0])

    @staticmethod
    def is_compacted(request: CanonicalRequest) -> bool:
        """The conversation resumed from the policy's summary (the harness compacted it)."""
        return any(SUMMARY_MARK in _text(m) for m in request.messages)

    def reply(self, request: CanonicalRequest, *, aux: bool = False) -> str:
        """The completion text for one pending request."""
        if aux:
            return AUX_TEXT
        if self.is_summary_request(request):  # first: the history it summarizes quotes the sub-agent's task
            return (
                f"<analysis>Listed the workspace, filled the context.</analysis>\n<summary>{SUMMARY_MARK} "
                "a sub-agent listed the workspace; the fix is not applied yet.</summary>"
            )
        if self.is_sub_agent(request):
            return self._shell(request, "ls") if not self._ran(request, "ls") else SUB_AGENT_REPORT
        if not request.tools:
            return AUX_TEXT
        if self.is_compacted(request):
            if self.solve and not self._ran(request, self.solution):
                return self._shell(request, self.solution)
            return FINAL_TEXT if self.solve else GIVE_UP_TEXT
        sub = self.recipe.sub_agent
        if (
            sub is not None
            and any(t.name == sub.name for t in request.tools)
            and not any(name == sub.name for name, _ in _calls(request))
        ):
            tool = next(t for t in request.tools if t.name == sub.name)
            arguments = {
                k: string.Template(v).substitute(prompt=SUB_AGENT_PROMPT) if isinstance(v, str) else v
                for k, v in sub.arguments.items()
            }
            return hermes_tool_call(sub.name, fill_required(arguments, tool))
        if self._ran(request, FILL_COMMAND) < self.max_fills:
            return self._shell(request, FILL_COMMAND)
        return GIVE_UP_TEXT  # the harness never compacted: end the episode (its lineage shows no compaction)
