"""The oracle policy: answers a harness's model requests so that it applies the task's reference solution.

It speaks the tiny model's own tool-call format (hermes: `<tool_call>{json}</tool_call>`) and calls the
harness's own shell tool, so the harness parses and runs the call exactly as it would a model's. Its
plan is read off the conversation itself, which makes it stateless and safe to retry:

1. with `look_first`, the first call lists the workspace, as an agent would look before it edits (with
   `look_after`, the same listing comes right after the solution instead, as an agent checks its work: an
   extra call that cannot undo the solve);
2. then the shell tool runs the solution as Harbor's oracle agent does: `bash /solution/solve.sh` (with
   `[solution].env` as `env K=V ...` in front) from the workdir, the solution/ folder staged read-only
   at /solution by the environment for this episode only (`reset(stage_solution=True)`, which
   `run_episode` sets for the oracle and nothing else). One short line, never the script's text: a
   harness runs its shell tool with /bin/sh (no `pipefail`, `[[ ]]`, arrays), filters what it accepts
   (qwen-code's command-root parser, gemini-cli's `$()` ban, grok-cli's `cd ` prefix, which it takes
   as a bare directory change) or keeps one shell for the episode (openhands, terminus-2: the script's
   `exit` would end it), and every one of them runs `bash FILE` alike. No `cd`: the sandbox starts every
   harness in the workdir and every shell tool runs there (the bash fixtures write relative paths, so
   an episode that ran elsewhere would score 0);
3. a harness that needs a finish command (mini-swe-agent) gets it next, or a call of its finish tool
   (gptme's `complete`);
4. once every planned call has a tool result: a short final text answer.

A harness that reads commands out of the reply's text instead of tool calls (terminus-2's JSON keystrokes)
gets the same plan written in its own format (`shell_tool.reply`), one step per assistant turn.

A harness that edits only through blocks in its reply (aider, `spec.edit_format`) gets one reply: the
files the solution writes as edit blocks (`edit_blocks`: the solution replayed in a throw-away local
sandbox), then the look as a fenced ```bash block, which the harness runs after applying the edits. When
the solution cannot be written as blocks (it deletes a file, writes bytes, needs an image build), the
oracle's reply runs the solution command in that block instead; the demo policy refuses.
"""

from __future__ import annotations

import base64
import json
import shlex
from typing import Any

from openenv.capture.canonical import CanonicalRequest, Tool
from openenv.errors import BadRequest
from openenv.harness.spec import HarnessSpec
from openenv.harness.tasks.model import Task

__all__ = [
    "FINAL_TEXT",
    "OraclePolicy",
    "demonstration_command",
    "fill_required",
    "hermes_tool_call",
    "solution_command",
]

FINAL_TEXT = "I applied the fix and the task is done."
LOOK_COMMAND = "ls -la"
AUX_TEXT = "Fix the task"
EDIT_PREFACE = "Here are the changes that fix the task."
LOOK_PREFACE = "Then check the workspace:"


def hermes_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One tool call in the hermes format the tiny model's chat template uses."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _placeholder(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"boolean": False, "integer": 0, "number": 0, "array": [], "object": {}}.get(str(kind), "openenv")


def fill_required(arguments: dict[str, Any], tool: Tool | None) -> dict[str, Any]:
    """Add a schema-valid placeholder for every required argument the spec did not name."""
    if tool is None:
        return arguments
    properties = tool.parameters.get("properties", {})
    filled = dict(arguments)
    for name in tool.parameters.get("required", []):
        if name not in filled:
            filled[name] = _placeholder(properties.get(name, {}))
    return filled


def _env_prefix(task: Task) -> str:
    """`env K=V ... ` for `[solution].env` (empty without one): `env` is the command's one root, which a
    harness's permission parser names (qwen-code refuses a command it cannot find the root of)."""
    if not task.solution_env:
        return ""
    return "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in task.solution_env.items()) + " "


def solution_command(task: Task, *, staged: bool = True) -> str:
    """The one-line shell command that applies `task`'s solution from the workdir, with `[solution].env`.

    `staged` (the environment put solution/ at /solution for this episode, `reset(stage_solution=True)`):
    `bash /solution/solve.sh`, as Harbor's oracle runs it, in the shell tool's working directory (the
    workdir; see the module docstring for why no `cd`). Unstaged (a remote oracle whose
    server does not stage, or a local sandbox without isolation, which has no Harbor paths): solve.sh's
    text is decoded from a base64 line and run by `bash -c` from the harness's working directory; that
    needs a solution that is solve.sh alone.

    Raises:
        BadRequest: the task has no solution (Harbor allows that; the oracle cannot run it), or an unstaged
            solution has more files than solve.sh.
    """
    if task.solution is None:
        raise BadRequest(f"task {task.id!r} has no solution/solve.sh, so the oracle cannot solve it")
    if staged:
        return f"{_env_prefix(task)}bash /solution/solve.sh"
    if set(task.solution_files) - {"solve.sh"}:
        raise BadRequest(
            f"task {task.id!r}'s solution/ has more files than solve.sh: the oracle needs it staged "
            "at /solution (reset option stage_solution=True)"
        )
    script = base64.b64encode(task.solution.encode()).decode()
    # The script's text is bash's `-c` argument, no file: where /tmp is shared (a sandbox without
    # isolation; bench_episode's floor), concurrent episodes of one task wrote one /tmp file, and one's
    # `> path` truncated the script another's bash was reading (exit 0, nothing done). Its stdin stays the
    # harness's, as with a file; `$0` is `solve.sh`.
    return f'{_env_prefix(task)}bash -c "$(echo {script} | base64 -d)" solve.sh'


def demonstration_command(task: Task) -> str:
    """The solution's own commands, for a demonstration a model learns from (`--policy demo`): a lone
    solve.sh's lines without its shebang, comments and blank lines, joined by newlines, with
    `[solution].env` as `env K=V` in front of a one-line script. `bash /solution/solve.sh` would teach a
    model to call a script that exists only in the oracle's episodes.

    Raises:
        BadRequest: no solution, a solution folder with more than solve.sh, or a script with no command.
    """
    if task.solution is None:
        raise BadRequest(f"task {task.id!r} has no solution/solve.sh, so the oracle cannot demonstrate it")
    if set(task.solution_files) - {"solve.sh"}:
        raise BadRequest(
            f"task {task.id!r}'s solution/ has more files than solve.sh: --policy demo sends "
            "solve.sh's own commands, which would need them; use --policy oracle"
        )
    lines = [
        line for line in task.solution.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise BadRequest(f"task {task.id!r}'s solve.sh has no command to demonstrate")
    body = "\n".join(lines)
    if len(lines) == 1:
        return _env_prefix(task) + body
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in task.solution_env.items()) + body


class OraclePolicy:
    """Replies that make `spec`'s harness run `task.solution` through its own shell tool.

    `staged=True` (default) expects the episode to have been reset with `stage_solution=True` (what
    `run_episode(policy="oracle")` does); a remote client driving a served env passes that reset option
    too, or `staged=False` for the inline form (see `solution_command`).
    """

    def __init__(
        self,
        spec: HarnessSpec,
        task: Task,
        *,
        look_first: bool = False,
        staged: bool = True,
        demonstrate: bool = False,
        look_after: bool = False,
    ) -> None:
        self.spec = spec
        self.task = task
        self.staged = staged
        self.demonstrate = demonstrate
        self._edits: str | None = None
        # An edit-block harness gets one reply of its own (`_edit_reply`), not this plan.
        self.plan = (
            []
            if spec.edit_format is not None
            else [
                *([LOOK_COMMAND] if look_first else []),
                demonstration_command(task) if demonstrate else solution_command(task, staged=staged),
                *([LOOK_COMMAND] if look_after else []),
                *([spec.finish_command] if spec.finish_command else []),
            ]
        )

    def _edit_reply(self) -> str:
        """The one reply of an edit-block harness (see the module docstring), built once per episode."""
        if self._edits is None:
            from openenv.harness.edit_blocks import (
                EditsUnavailable,
                aider_diff_blocks,
                changed_files,
                solved_workspace,
            )

            try:
                blocks = aider_diff_blocks(changed_files(self.task.workspace, solved_workspace(self.task)))
                shell = LOOK_COMMAND
            except EditsUnavailable:
                if self.demonstrate:
                    raise
                blocks, shell = "", solution_command(self.task, staged=self.staged)
            self._edits = f"{EDIT_PREFACE}\n\n{blocks}\n{LOOK_PREFACE}\n\n```bash\n{shell}\n```\n"
        return self._edits

    def _edit_format_reply(self, request: CanonicalRequest) -> str:
        """The edit blocks until the harness has them in its history; then the final text (a harness that asks
        again, e.g. to reflect on a failed block, is answered without a second copy of the edits)."""
        reply = self._edit_reply()
        said = (m.text() for m in request.messages if m.role == "assistant")
        return FINAL_TEXT if any(reply.strip() in text for text in said) else reply

    def _shell_call(self, request: CanonicalRequest, command: str) -> str:
        tool = next((t for t in request.tools if t.name == self.spec.shell_tool.name), None)
        arguments = fill_required(self.spec.shell_tool.call_arguments(command), tool)
        return hermes_tool_call(self.spec.shell_tool.name, arguments)

    def _text_reply(self, request: CanonicalRequest) -> str:
        """A text-protocol harness (terminus-2): the plan's next command written the harness's way, one
        reply per assistant turn so far; after the plan, the final reply (repeated if it asks again)."""
        shell = self.spec.shell_tool
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done < len(self.plan):
            return shell.reply_text(shell.call_arguments(self.plan[done]))
        assert shell.final_reply is not None
        return shell.final_reply

    def reply(self, request: CanonicalRequest, *, aux: bool = False) -> str:
        """The completion text for one pending request."""
        if aux:
            return AUX_TEXT
        if self.spec.edit_format is not None:
            return self._edit_format_reply(request)
        if self.spec.shell_tool.in_text:
            return self._text_reply(request)
        if not request.tools:
            return AUX_TEXT
        results = sum(1 for m in request.messages if m.role == "tool")
        if results < len(self.plan):
            return self._shell_call(request, self.plan[results])
        finish = self.spec.finish_tool
        if finish is not None and results == len(self.plan):
            tool = next((t for t in request.tools if t.name == finish), None)
            return hermes_tool_call(finish, fill_required({}, tool))
        return FINAL_TEXT
