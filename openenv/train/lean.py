"""Lean harness configurations for training on a CPU: each harness unmodified, made lean only through its
own documented flags, environment variables and config files (`LEAN`), written as specs into a run's folder.

Why: a harness's default system prompt and tool schemas are most of every training sequence. With the
learner's tokenizer and template, the first request of a `fileops` episode is 948 tokens through pi's
defaults, ~6,800 through Codex's and ~10,600 through Gemini CLI's; lean, each is 120-300 tokens (measured:
pi 118, claude-code 134, codex 169, gemini-cli 299): 8-40x fewer positions in every training step. What stays
is each harness's own shape: its tool's name and arguments (`bash(command)`, `exec_command(cmd)`,
`Bash(command)`, `run_shell_command(command)`), its extra tools where no flag removes them (Codex keeps
`write_stdin`, `request_user_input`, `view_image`), its wire format, and the context it adds on its own
(Gemini CLI's `<session_context>` with the date and the workspace's file tree, in the user turn). The shipped
`envs/<harness>` specs are untouched: `lean_envs` writes the lean ones under a run's folder, and the run puts
them first on `$OPENENV_ENVS_PATH`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

__all__ = ["LEAN", "LEAN_MINI_FLAGS", "LEAN_PI_FLAGS", "HarnessName", "Lean", "lean_envs", "lean_prompt"]


def lean_prompt(tool: str) -> str:
    """The one-line system prompt of every lean harness but mini-swe-agent, naming the harness's shell tool."""
    return f"Use the {tool} tool to do the task, then say done."


LEAN_PI_FLAGS = [
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    "--no-context-files",
    "--tools",
    "bash",
    "--system-prompt",
    lean_prompt("bash"),
]
LEAN_MINI_SYSTEM_PROMPT = (
    "Use the bash tool to do the task, then run: echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
)
LEAN_MINI_FLAGS = [
    "-c",
    f"agent.system_template={LEAN_MINI_SYSTEM_PROMPT}",
    "-c",
    "agent.instance_template={{task}}",
    "-c",
    "agent.step_limit=1",
]


@dataclass(frozen=True)
class Lean:
    """What makes one harness lean, each part through the harness's own configuration surface."""

    flags: tuple[str, ...] = ()
    after: str | None = None  # the argument the flags follow (None: the end of the command)
    env: dict[str, str] = field(default_factory=dict)  # added to the spec's env (`${home}` etc. expand)
    files: dict[str, str] = field(default_factory=dict)  # text config files, path under the episode's home
    settings: dict[str, Any] = field(default_factory=dict)  # merged into the spec's first JSON config file


LEAN: dict[str, Lean] = {
    "pi": Lean(tuple(LEAN_PI_FLAGS), after="-p"),
    # mini-swe-agent reads `-c key=value` overrides after its config file: they go last.
    "mini-swe-agent": Lean(tuple(LEAN_MINI_FLAGS)),
    # Claude Code's --bare already sends 3 tools and a short system prompt; --tools and --system-prompt
    # narrow it to Bash and one line (its SDK line stays: it is not part of the system prompt option).
    "claude-code": Lean(("--tools", "Bash", "--system-prompt", lean_prompt("Bash")), after="--bare"),
    # Codex: `model_instructions_file` replaces the base instructions; the `include_*` switches drop the
    # permissions block and the <environment_context> user turn; the skills block and the multi-agent and
    # goal tools go with their own switches.
    "codex": Lean(
        (
            "-c",
            'model_instructions_file="${home}/.codex/lean.md"',
            "-c",
            "include_permissions_instructions=false",
            "-c",
            "include_environment_context=false",
            "-c",
            "skills.include_instructions=false",
            "-c",
            "features.multi_agent=false",
            "-c",
            "features.goals=false",
        ),
        after="--dangerously-bypass-approvals-and-sandbox",
        files={".codex/lean.md": lean_prompt("exec_command") + "\n"},
    ),
    # Gemini CLI: GEMINI_SYSTEM_MD replaces the system prompt with a file; `tools.core` keeps one tool.
    "gemini-cli": Lean(
        env={"GEMINI_SYSTEM_MD": "${home}/.gemini/system.md"},
        files={".gemini/system.md": lean_prompt("run_shell_command") + "\n"},
        settings={"tools": {"core": ["run_shell_command"]}},
    ),
}
HarnessName = Literal["pi", "mini-swe-agent", "claude-code", "codex", "gemini-cli"]


def _lean_spec(spec: dict[str, Any], lean: Lean) -> dict[str, Any]:
    command = list(spec["command"])
    at = command.index(lean.after) + 1 if lean.after else len(command)
    spec["command"] = [*command[:at], *lean.flags, *command[at:]]
    if lean.env:
        spec["env"] = {**spec.get("env", {}), **lean.env}
    files = list(spec.get("config_files", []))
    if lean.settings:
        first = next(f for f in files if f.get("format") == "json")
        first["content"] = {**first["content"], **lean.settings}
    files += [{"path": path, "format": "text", "content": text} for path, text in lean.files.items()]
    if files:
        spec["config_files"] = files
    spec["description"] = f"{spec['description']} Lean: one shell tool and a one-line system prompt."
    return spec


def lean_envs(out: Path) -> Path:
    """Write `out/envs/<harness>/spec.yaml` for every harness in `LEAN`: the shipped spec made lean; returns
    `out/envs`."""
    from openenv.resources import shipped_envs_dir

    for harness, lean in LEAN.items():
        spec = yaml.safe_load((shipped_envs_dir() / harness / "spec.yaml").read_text())
        folder = out / "envs" / harness
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.yaml").write_text(yaml.safe_dump(_lean_spec(spec, lean), sort_keys=False))
    return out / "envs"
