"""Harbor task directories: `instruction.md`, `task.toml`, `tests/test.sh`, `solution/solve.sh`.

Harbor runs tasks in a container where the tests live at `/tests`, the solution at `/solution`, the
working tree at `/app` and rewards go to `/logs/verifier`. On a local sandbox those folders are
elsewhere, so the scripts' absolute paths are rewritten to the sandbox's environment variables.
A `workspace/` folder (an openenv extension) holds the starting files when there is no image to build.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from openenv.errors import BadRequest
from openenv.harness.tasks.model import DEFAULT_TEST_COMMAND, Task, read_tree

__all__ = ["load_harbor_task", "localize_paths"]

_CONTAINER_PATHS = {
    "/logs/verifier": "$REWARD_DIR",
    "/solution": "$SOLUTION_DIR",
    "/oracle": "$SOLUTION_DIR",
    "/tests": "$TESTS_DIR",
    "/app": "$WORKSPACE",
}
_PATH_RE = re.compile(r"(?<![\w./$-])(" + "|".join(map(re.escape, _CONTAINER_PATHS)) + r")(?=[/\s\"';)]|$)")


def localize_paths(script: str) -> str:
    """Rewrite Harbor's container paths (`/tests/...`, `/logs/verifier/...`) to sandbox variables."""
    return _PATH_RE.sub(lambda m: _CONTAINER_PATHS[m.group(1)], script)


def load_harbor_task(directory: Path, *, source: str = "harbor") -> Task:
    """Load one Harbor task directory.

    Raises:
        BadRequest: a required file (instruction.md, task.toml, tests/test.sh, solution/solve.sh) is
            missing; the message names it.
    """
    for required in ("instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh"):
        if not (directory / required).is_file():
            raise BadRequest(f"{directory} is not a Harbor task: {required} is missing")
    config = tomllib.loads((directory / "task.toml").read_text())
    tests = {name: localize_paths(text) for name, text in read_tree(directory / "tests").items()}
    metadata = {key: str(value) for key, value in config.get("metadata", {}).items()}
    return Task(
        id=directory.name,
        instruction=(directory / "instruction.md").read_text().strip(),
        workspace=read_tree(directory / "workspace"),
        tests=tests,
        test_command=DEFAULT_TEST_COMMAND,
        solution=localize_paths((directory / "solution" / "solve.sh").read_text()),
        timeout_s=float(config.get("agent", {}).get("timeout_sec", 300)),
        verifier_timeout_s=float(config.get("verifier", {}).get("timeout_sec", 120)),
        source=source,
        metadata=metadata,
    )
