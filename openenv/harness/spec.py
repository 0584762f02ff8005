"""HarnessSpec: the declarative seam of one harness (install, config, env, command, dialect, tools, aux).

Everything that differs between harnesses is data in `envs/<name>/spec.yaml`; the machinery that runs
any of them lives once in `openenv.harness`. String values may use `${var}` placeholders, filled from a
`SessionContext` when an episode starts (see `TEMPLATE_VARS`).
"""

from __future__ import annotations

import base64
import json
import string
from pathlib import Path
from typing import Any, Literal, assert_never

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from openenv.capture.canonical import CanonicalRequest
from openenv.capture.dialects import DIALECT_NAMES

__all__ = [
    "TEMPLATE_VARS",
    "AuxRule",
    "ConfigFile",
    "Dialect",
    "HarnessSpec",
    "InstallSpec",
    "LongEpisode",
    "SessionContext",
    "ShellTool",
    "SubAgentTool",
    "load_spec",
    "render",
]

# The wire formats the proxy speaks, from its route registry (one list, in `capture/dialects`).
Dialect = Literal[DIALECT_NAMES]  # type: ignore[valid-type]  # Literal of a runtime tuple: pydantic reads it, mypy cannot

# Placeholders a spec may use; `base_url` is the session root without `/v1` (harnesses append it).
TEMPLATE_VARS = ("base_url", "api_key", "model", "workspace", "home", "instruction")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionContext(_Spec):
    """The per-episode values a spec is rendered with."""

    base_url: str
    api_key: str
    model: str
    workspace: Path
    home: Path
    instruction: str

    def variables(self) -> dict[str, str]:
        return {name: str(getattr(self, name)) for name in TEMPLATE_VARS}


def render(value: Any, variables: dict[str, str]) -> Any:
    """Fill `${var}` placeholders in every string inside `value` (dicts and lists included).

    Raises:
        KeyError: a placeholder names a variable that is not in `variables`.
    """
    if isinstance(value, str):
        return string.Template(value).substitute(variables)
    if isinstance(value, list):
        return [render(item, variables) for item in value]
    if isinstance(value, dict):
        return {render(key, variables): render(item, variables) for key, item in value.items()}
    return value


class InstallSpec(_Spec):
    """How the pinned CLI is installed into `.cache/harnesses/<name>/` (see scripts/install_harnesses.sh)."""

    method: Literal["npm", "pip"]
    package: str
    version: str
    bin: str = Field(description="executable name inside the prefix's bin/ folder")
    node: Literal["system", "22", "24"] | None = Field(
        default=None,
        description="npm harnesses only: which Node.js runs the CLI (22 and 24 are installed into "
        "the harness cache as nodeNN/ from the npm registry's `node` package)",
    )

    @property
    def node_dir(self) -> str | None:
        """The harness cache folder of the Node.js this CLI runs on (`node22`), None for the system's."""
        return f"node{self.node}" if self.node not in (None, "system") else None

    python: Literal["3.12", "3.13"] | None = Field(
        default=None,
        description="pip harnesses only: the Python the venv is made with when the system's (3.11) is too "
        "old (openhands, harbor); found as pythonX.Y on PATH or under pyenv",
    )

    @model_validator(mode="after")
    def _runtime_matches_method(self) -> InstallSpec:
        if self.python is not None and self.method != "pip":
            raise ValueError("python: only pip harnesses run in a venv of their own Python")
        if self.node is not None and self.method != "npm":
            raise ValueError("node: only npm harnesses run on Node.js")
        return self


class ConfigFile(_Spec):
    """A config file written before the harness starts; `path` is relative to the episode's HOME."""

    path: str
    format: Literal["json", "yaml", "text"]
    content: Any = Field(default=None, description="a mapping for json/yaml, a string for text; templated")
    source: str | None = Field(
        default=None,
        description="a file beside spec.yaml whose text is written as is (not templated), e.g. a launcher "
        "script a harness without a CLI of its own runs with (terminus-2); `load_spec` reads it",
    )

    @model_validator(mode="after")
    def _content_or_source(self) -> ConfigFile:
        if self.source is not None and (self.format != "text" or not isinstance(self.content, str)):
            raise ValueError(
                f"{self.path}: a `source` file is text, read by load_spec from the spec's folder"
            )
        if self.source is None and self.content is None:
            raise ValueError(f"{self.path}: give `content` (templated) or `source` (a file beside spec.yaml)")
        return self

    def render_text(self, variables: dict[str, str]) -> str:
        if self.source is not None:
            return str(self.content)
        content = render(self.content, variables)
        match self.format:
            case "json":
                return json.dumps(content, indent=2) + "\n"
            case "yaml":
                return yaml.safe_dump(content, sort_keys=False)
            case "text":
                return str(content)
            case _:
                assert_never(self.format)


class ShellTool(_Spec):
    """The harness's own shell tool, which the oracle policy calls to apply a task's solution.

    `arguments` is the argument object with `${command}` where the shell command goes; required fields
    the spec does not name are filled from the tool's JSON Schema in the live request.
    """

    name: str
    arguments: dict[str, Any]
    encoding: Literal["plain", "base64"] = Field(
        default="plain",
        description="base64 wraps scripts as `echo B64 | base64 -d | sh`, for harnesses whose shell tool "
        "refuses backticks or $() anywhere in a command (Gemini CLI 0.61)",
    )

    reply: str | None = Field(
        default=None,
        description="for harnesses that read commands out of the reply text instead of tool calls "
        "(terminus-2's JSON): the whole reply, where `${arguments}` is the JSON of the call's arguments",
    )
    final_reply: str | None = Field(
        default=None, description="with `reply`: the text that ends the run (e.g. task_complete: true)"
    )

    @model_validator(mode="after")
    def _text_replies_come_in_pairs(self) -> ShellTool:
        if (self.reply is None) != (self.final_reply is None):
            raise ValueError("shell_tool: `reply` and `final_reply` go together (a text protocol needs both)")
        return self

    @property
    def in_text(self) -> bool:
        """Whether the harness reads commands from the reply's text (no tool calls)."""
        return self.reply is not None

    def call_arguments(self, command: str) -> dict[str, Any]:
        if self.encoding == "base64" and "\n" in command:
            command = f"echo {base64.b64encode(command.encode()).decode()} | base64 -d | sh"
        return render(self.arguments, {"command": command})

    def command_in(self, arguments: dict[str, Any]) -> str:
        """The shell command a call of this tool runs: the argument `arguments` names where `${command}` stands
        (pi's `command`, codex's `cmd`); "" when the call lacks it. The inverse of `call_arguments` for plain
        commands, so trajectories can be read the same way in every harness."""

        def find(template: Any, value: Any) -> str | None:
            if isinstance(template, str) and "${command}" in template:
                before, _, after = template.partition("${command}")  # terminus-2 sends "${command}\n"
                ok = isinstance(value, str) and value.startswith(before) and value.endswith(after)
                return (
                    value[len(before) : len(value) - len(after)]
                    if ok and len(value) >= len(before + after)
                    else None
                )
            if isinstance(template, dict) and isinstance(value, dict):
                return next(
                    (
                        found
                        for key, item in template.items()
                        if key in value and (found := find(item, value[key])) is not None
                    ),
                    None,
                )
            if isinstance(template, list) and isinstance(value, list) and len(template) == len(value):
                return next(
                    (found for item, got in zip(template, value) if (found := find(item, got)) is not None),
                    None,
                )
            return None

        return find(self.arguments, arguments) or ""

    def reply_text(self, arguments: dict[str, Any]) -> str:
        """The text-protocol reply that runs one call (only when `reply` is set)."""
        assert self.reply is not None
        return string.Template(self.reply).substitute(arguments=json.dumps(arguments))


class AuxRule(_Spec):
    """Recognises an auxiliary request (title generator, classifier, ...); all given conditions hold."""

    reason: str
    system_contains: str | None = None
    no_tools: bool | None = None

    def matches(self, request: CanonicalRequest) -> bool:
        checks = [
            self.system_contains is None or self.system_contains in request.system_text(),
            self.no_tools is None or self.no_tools == (not request.tools),
        ]
        return all(checks)


class SubAgentTool(_Spec):
    """The harness's tool that starts a sub-agent (a new conversation through the proxy)."""

    name: str
    arguments: dict[str, Any] = Field(description="the call's arguments; `${prompt}` is the sub-agent's task")


class LongEpisode(_Spec):
    """How the `long` policy drives this harness into long-episode branches: the launch changes that
    enable a sub-agent tool and compact the history early, and how the harness's summary request looks.

    Only the `long` policy uses it (`openenv run --policy long`, the long-episode tests): a run with any
    other policy starts the harness exactly as `command`/`env` say.
    """

    drop_args: list[str] = Field(default_factory=list, description="items removed from `command`")
    add_args: list[str] = Field(default_factory=list, description="items appended to `command`; templated")
    env: dict[str, str] = Field(
        default_factory=dict, description="env vars added (e.g. a low compaction threshold); templated"
    )
    sub_agent: SubAgentTool | None = None
    summarizer: list[str] = Field(
        min_length=1,
        description="text that marks the harness's summary request (its system prompt or its "
        "last user message contains one of these)",
    )


class HarnessSpec(_Spec):
    """One harness: what to install, how to configure and start it, and how it talks to the model."""

    name: str
    description: str
    install: InstallSpec
    dialect: Dialect
    command: list[str] = Field(description="argv; the first item is the installed bin name; templated")
    env: dict[str, str] = Field(default_factory=dict, description="extra env vars; templated")
    config_files: list[ConfigFile] = Field(default_factory=list)
    setup_commands: list[list[str]] = Field(
        default_factory=list, description="argv lists run once before the harness (e.g. `cline auth`)"
    )
    shell_tool: ShellTool
    finish_command: str | None = Field(
        default=None, description="a shell command the harness needs to end its run (mini-swe-agent)"
    )
    finish_tool: str | None = Field(
        default=None,
        description="a tool the harness needs called to end its run (gptme's `complete`); the oracle calls "
        "it after the plan, with schema placeholders for any required arguments",
    )
    edit_format: Literal["diff"] | None = Field(
        default=None,
        description="the harness changes files only through edit blocks in its reply text, in this format "
        "(aider's SEARCH/REPLACE `diff`); the oracle and demo policies then write the solution's files as "
        "blocks and the shell step as a fenced ```bash block (see openenv/harness/edit_blocks.py)",
    )
    aux: list[AuxRule] = Field(default_factory=list)
    stdin_devnull: bool = True
    model: str = Field(default="tiny", description="model name the harness is configured with")
    long_episode: LongEpisode | None = Field(
        default=None,
        description="how the `long` policy forces a sub-agent and a compaction (see LongEpisode)",
    )

    @model_validator(mode="after")
    def _command_starts_with_bin(self) -> HarnessSpec:
        if not self.command or self.command[0] != self.install.bin:
            raise ValueError(
                f"{self.name}: command must start with the installed bin {self.install.bin!r}, "
                f"got {self.command[:1]!r}"
            )
        return self

    def aux_reason(self, request: CanonicalRequest) -> str | None:
        """Return why a request is auxiliary (kept out of training sequences), or None for a main turn."""
        return next((rule.reason for rule in self.aux if rule.matches(request)), None)

    def long_variant(self) -> HarnessSpec:
        """This harness as the `long` policy starts it (`long_episode`'s argv and env changes applied);
        the variant has no `long_episode` of its own, so applying it twice is refused, not doubled.

        Raises:
            ValueError: the harness has no `long_episode` recipe.
        """
        recipe = self.long_episode
        if recipe is None:
            raise ValueError(f"{self.name} has no long_episode recipe in its spec.yaml")
        command = [arg for arg in self.command if arg not in recipe.drop_args] + recipe.add_args
        return self.model_copy(
            update={"command": command, "env": {**self.env, **recipe.env}, "long_episode": None}
        )

    def argv(self, ctx: SessionContext) -> list[str]:
        return render(self.command, ctx.variables())

    def setup_argvs(self, ctx: SessionContext) -> list[list[str]]:
        return [render(argv, ctx.variables()) for argv in self.setup_commands]

    def environment(self, ctx: SessionContext) -> dict[str, str]:
        return render(self.env, ctx.variables())

    def write_config(self, ctx: SessionContext) -> list[Path]:
        """Write every config file under the episode's HOME and return their paths."""
        written = []
        for config in self.config_files:
            path = ctx.home / config.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(config.render_text(ctx.variables()))
            written.append(path)
        return written


def load_spec(path: Path) -> HarnessSpec:
    """Load and validate `envs/<name>/spec.yaml`.

    Raises:
        pydantic.ValidationError: the file does not describe a valid harness; the message names the field.
    """
    raw = yaml.safe_load(path.read_text())
    for config in raw.get("config_files", []) if isinstance(raw, dict) else []:
        if isinstance(config, dict) and isinstance(config.get("source"), str):
            config["content"] = (path.parent / config["source"]).read_text()
    return HarnessSpec.model_validate(raw)
