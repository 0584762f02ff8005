"""The Task model: one problem for a harness, with its workspace, hidden tests and reference solution.

Paths are Harbor's (issue 16): the agent works in `workdir` (`/app` unless the task says otherwise),
the hidden tests appear at `/tests` only after the agent is gone, rewards go to `/logs/verifier`, and
the oracle's solution lives at `/solution`. Sandboxes show those folders at those absolute paths, so
task scripts run unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.capture.budget import Budget

__all__ = ["DEFAULT_TEST_COMMAND", "FileData", "Task", "TaskSource", "read_data", "read_tree"]

# Where a task came from.
TaskSource = Literal["builtin", "harbor", "datasets"]

# The verifier runs this from the workdir once the agent is gone; the tests write
# /logs/verifier/reward.json (a flat dict of numbers) or reward.txt (one float). The exit code is ignored.
DEFAULT_TEST_COMMAND = "bash /tests/test.sh"
FileData = str | bytes


class Task(BaseModel):
    """A task: the instruction the harness gets, the files it starts from, and how it is judged.

    The hidden tests are copied into the sandbox only after the harness exits, so the harness never
    sees them. The reference solution is a shell script run from the workdir (the oracle policy sends
    it through the harness's own shell tool); a task without one loads, and the oracle refuses it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    instruction: str
    workspace: dict[str, FileData] = Field(default_factory=dict, description="relative path -> text or bytes")
    tests: dict[str, FileData] = Field(description="hidden test files: relative path -> text or bytes")
    test_command: str = DEFAULT_TEST_COMMAND
    solution: str | None = Field(
        default=None, description="solve.sh: solves the task when run in the workdir"
    )
    solution_files: dict[str, FileData] = Field(
        default_factory=dict, description="the whole solution/ folder"
    )
    timeout_s: float = Field(default=300, gt=0, description="the harness's wall-clock budget")
    verifier_timeout_s: float = Field(default=120, gt=0)
    workdir: str = Field(default="/app", description="the container path the agent and the tests run in")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="the Dockerfile's ENV and [environment].env: "
        "set for the agent, the oracle and the tests (never PATH or HOME)",
    )
    executables: list[str] = Field(
        default_factory=list, description="workspace files with the executable bit"
    )
    verifier_env: dict[str, str] = Field(default_factory=dict, description="[verifier].env")
    solution_env: dict[str, str] = Field(default_factory=dict, description="[solution].env")
    verifier_mode: Literal["shared", "separate"] = "shared"
    image: str | None = Field(default=None, description="[environment].docker_image: run in this image")
    base_image: str | None = Field(default=None, description="the Dockerfile's FROM image")
    environment_dir: str | None = Field(
        default=None, description="host folder of environment/ (build context)"
    )
    build_steps: list[str] = Field(default_factory=list, description="Dockerfile steps only a build can run")
    outside_files: list[str] = Field(
        default_factory=list, description="files the Dockerfile puts outside workdir"
    )
    schema_version: str | None = None
    source: TaskSource = "builtin"
    metadata: dict[str, str] = Field(default_factory=dict)
    budget: Budget | None = Field(
        default=None, description="caps on turns / sampled tokens / context per episode"
    )

    def needs_build(self) -> bool:
        """Only an image build reproduces this task's environment (RUN steps, files outside workdir)."""
        return bool(self.build_steps or self.outside_files)


def read_data(path: Path) -> FileData:
    """A file's text, or its exact bytes when it is not UTF-8 (an image, a compiled fixture)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def read_tree(root: Path) -> dict[str, FileData]:
    """Read every file under `root` as {relative path: text, or bytes when it is not UTF-8}, skipping
    caches; a binary file keeps its exact bytes."""
    if not root.is_dir():
        return {}
    files: dict[str, FileData] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(root).as_posix()] = read_data(path)
    return files
