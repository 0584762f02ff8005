"""Harbor task folders, loaded as Harbor (0.25.0) loads them.

A task is `instruction.md`, `task.toml`, `environment/` (a `Dockerfile` whose folder is the build
context, unless `[environment].docker_image` names an image), `tests/test.sh` and, optionally,
`solution/solve.sh`. The agent's starting files are what the Dockerfile copies from the build context
into its `WORKDIR` (or `[environment].workdir`); steps only a build can run (`RUN`, files placed
outside the workdir) are recorded, so a sandbox that cannot build says so instead of starting the
agent somewhere else. Scripts are never rewritten: they run at the paths they name (`/tests`,
`/logs/verifier`, `/solution`, the workdir), which the sandboxes provide.

See /work/shared/harbor-format.md for the format, with sources.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from openenv.errors import BadRequest
from openenv.harness.tasks.dockerfile import parse_dockerfile
from openenv.harness.tasks.model import DEFAULT_TEST_COMMAND, Task, TaskSource, read_data, read_tree

__all__ = ["HARBOR_AGENT_TIMEOUT_S", "HARBOR_VERIFIER_TIMEOUT_S", "load_harbor_task", "strip_canary"]

HARBOR_VERIFIER_TIMEOUT_S = 600.0  # Harbor's [verifier].timeout_sec default
# Harbor's [agent].timeout_sec default is None (no limit); a harness here always gets a deadline.
HARBOR_AGENT_TIMEOUT_S = 3600.0


def strip_canary(text: str) -> str:
    """Drop leading `harbor-canary` lines, as Harbor does before handing the instruction to the agent."""
    lines = text.splitlines()
    while lines and "harbor-canary" in lines[0].lower():
        lines.pop(0)
    return "\n".join(lines).strip()


def _table(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise BadRequest(f"task.toml: [{name}] must be a table")
    return value


def _strings(table: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise BadRequest(f"task.toml: {where}.{key} must be a table of strings")
    return {str(k): str(v) for k, v in value.items()}


def _seconds(table: dict[str, Any], where: str, default: float) -> float:
    value = table.get("timeout_sec", default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadRequest(f"task.toml: {where}.timeout_sec must be a positive number, got {value!r}")
    return float(value)


_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
_NEVER_SET = {"PATH", "HOME", "TMPDIR", "USER"}  # the sandbox's own: a task cannot move them


def _task_env(dockerfile_env: dict[str, str], table_env: dict[str, str]) -> dict[str, str]:
    """The Dockerfile's ENV, then [environment].env with `${VAR}` / `${VAR:-default}` filled from this
    process's environment (as Harbor fills them), minus the variables the sandbox owns."""

    def fill(value: str) -> str:
        return _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)

    merged = {**dockerfile_env, **{k: fill(v) for k, v in table_env.items()}}
    return {k: v for k, v in merged.items() if k not in _NEVER_SET}


def _test_command(script: str | bytes) -> str:
    """How Harbor runs tests/test.sh: executed directly, so its shebang picks the interpreter."""
    first = script.splitlines()[0] if script else ""
    first = first.decode("utf-8", "replace") if isinstance(first, bytes) else first
    if first.startswith("#!"):
        interpreter = first[2:].strip()
        if interpreter and not interpreter.endswith(("/sh", "/bash")):
            return f"{interpreter} /tests/test.sh"
    return DEFAULT_TEST_COMMAND


def _check_links(directory: Path) -> None:
    """Refuse links that leave the task folder, as Harbor does ("Input paths must stay within the
    task"): a task must not make us read `/etc/shadow` into a sandbox as a test file."""
    root = directory.resolve()
    for sub in ("environment", "tests", "solution"):
        for path in (directory / sub).rglob("*") if (directory / sub).is_dir() else ():
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                raise BadRequest(f"{path} links outside the task folder; task files must stay within it")


def load_harbor_task(directory: Path, *, source: TaskSource = "harbor") -> Task:
    """Load one Harbor task folder.

    Raises:
        BadRequest: a required file is missing (instruction.md, task.toml, tests/test.sh, and
            environment/Dockerfile unless [environment].docker_image is set), task.toml is not valid
            TOML, or a value has the wrong type; the message names it.
    """
    directory = Path(directory)
    for required in ("instruction.md", "task.toml", "tests/test.sh"):
        if not (directory / required).is_file():
            raise BadRequest(f"{directory} is not a Harbor task: {required} is missing")
    _check_links(directory)
    try:
        config = tomllib.loads((directory / "task.toml").read_text())
    except tomllib.TOMLDecodeError as exc:
        raise BadRequest(f"{directory}/task.toml is not valid TOML: {exc}") from None
    if config.get("steps"):
        raise BadRequest(
            f"{directory}: multi-step Harbor tasks ([[steps]]) are not supported; one instruction.md "
            "and one tests/test.sh per task"
        )
    environment, verifier = _table(config, "environment"), _table(config, "verifier")
    agent, solution_table = _table(config, "agent"), _table(config, "solution")
    # `version` is the pre-1.3 spelling of `schema_version` (Harbor's handle_version_rename).
    schema_version = config.get("schema_version", config.get("version"))

    env_dir = directory / "environment"
    dockerfile = env_dir / "Dockerfile"
    image = environment.get("docker_image") or None
    if dockerfile.is_file():
        plan = parse_dockerfile(dockerfile, env_dir)
    elif image is None:
        compose = (
            " (docker-compose environments are not supported)"
            if any((env_dir / name).is_file() for name in ("docker-compose.yaml", "docker-compose.yml"))
            else ""
        )
        raise BadRequest(
            f"{directory} is not a Harbor task we can run: environment/Dockerfile is missing "
            f"and task.toml sets no [environment].docker_image{compose}"
        )
    else:
        plan = None
    workdir = str(environment.get("workdir") or (plan.workdir if plan else "/app"))
    if not workdir.startswith("/"):
        raise BadRequest(f"task.toml: [environment].workdir must be an absolute path, got {workdir!r}")
    sources = plan.workspace_files(workdir) if plan else {}
    workspace = {rel: read_data(src) for rel, src in sources.items()}
    tests = read_tree(directory / "tests")
    solution_files = read_tree(directory / "solution")
    solve = solution_files.get("solve.sh")
    mode = verifier.get("environment_mode", "shared")
    if mode not in ("shared", "separate"):
        raise BadRequest(f"task.toml: [verifier].environment_mode must be shared or separate, got {mode!r}")
    task_meta = _table(config, "task")
    return Task(
        id=directory.name,
        instruction=strip_canary((directory / "instruction.md").read_text()),
        workspace=workspace,
        tests=tests,
        test_command=_test_command(tests["test.sh"]),
        solution=solve.decode("utf-8", "replace") if isinstance(solve, bytes) else solve,
        solution_files=solution_files,
        timeout_s=_seconds(agent, "[agent]", HARBOR_AGENT_TIMEOUT_S),
        verifier_timeout_s=_seconds(verifier, "[verifier]", HARBOR_VERIFIER_TIMEOUT_S),
        workdir=workdir,
        env=_task_env(plan.env if plan else {}, _strings(environment, "env", "[environment]")),
        executables=sorted(rel for rel, src in sources.items() if src.stat().st_mode & 0o111),
        verifier_env=_strings(verifier, "env", "[verifier]"),
        solution_env=_strings(solution_table, "env", "[solution]"),
        verifier_mode="separate" if mode == "separate" or "environment" in verifier else "shared",
        image=str(image) if image else None,
        base_image=plan.base_image if plan else None,
        environment_dir=str(env_dir.resolve()) if env_dir.is_dir() else None,
        build_steps=plan.unreproducible if plan else [],
        outside_files=plan.outside_files(workdir) if plan else [],
        schema_version=str(schema_version) if schema_version is not None else None,
        source=source,
        metadata={
            str(k): str(v)
            for k, v in {
                **_table(config, "metadata"),
                **({"name": task_meta["name"]} if "name" in task_meta else {}),
            }.items()
        },
    )
