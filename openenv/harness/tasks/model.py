"""The Task model: one problem for a harness, with its workspace, hidden tests and reference solution."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_TEST_COMMAND", "Task", "read_tree"]

# The verifier runs this in the workspace with TESTS_DIR, REWARD_DIR and WORKSPACE set; the command
# writes REWARD_DIR/reward.json (a dict of numbers) or reward.txt (one float), or else its exit code counts.
DEFAULT_TEST_COMMAND = 'bash "$TESTS_DIR/test.sh"'


class Task(BaseModel):
    """A task: the instruction the harness gets, the files it starts from, and how it is judged.

    The hidden tests are copied into the sandbox only after the harness exits, so the harness never
    sees them. The reference solution is a shell script run in the workspace (the oracle policy sends
    it through the harness's own shell tool).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    instruction: str
    workspace: dict[str, str] = Field(default_factory=dict, description="relative path -> text")
    tests: dict[str, str] = Field(description="hidden test files: relative path -> text")
    test_command: str = DEFAULT_TEST_COMMAND
    solution: str = Field(description="shell script that solves the task when run in the workspace")
    timeout_s: float = Field(default=300, gt=0, description="the harness's wall-clock budget")
    verifier_timeout_s: float = Field(default=120, gt=0)
    source: Literal["builtin", "harbor", "datasets"] = "builtin"
    metadata: dict[str, str] = Field(default_factory=dict)


def read_tree(root: Path) -> dict[str, str]:
    """Read every text file under `root` as {relative path: text}, skipping caches."""
    if not root.is_dir():
        return {}
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(root).as_posix()] = path.read_text()
    return files
