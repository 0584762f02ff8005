"""Shared by the learn tests: running a fileops task's own verifier on a workspace outside any sandbox."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def grade(task_dir: Path, workspace: Path, tmp_path: Path) -> float:
    """Run the task's test.sh from the workspace as the verifier does; the reward it wrote."""
    reward_dir = tmp_path / "verifier"
    reward_dir.mkdir(exist_ok=True)
    (reward_dir / "reward.json").unlink(missing_ok=True)
    env = {"PATH": os.environ["PATH"], "TESTS_DIR": str(task_dir / "tests"), "REWARD_DIR": str(reward_dir)}
    subprocess.run(
        ["sh", str(task_dir / "tests" / "test.sh")],
        cwd=workspace,
        env=env,
        check=False,
        capture_output=True,
        timeout=30,
    )
    return json.loads((reward_dir / "reward.json").read_text())["reward"]


def starting_workspace(task_dir: Path, tmp_path: Path) -> Path:
    """A copy of the task's starting files in `tmp_path/app`."""
    workspace = tmp_path / "app"
    workspace.mkdir(parents=True)
    for path in (task_dir / "environment" / "app").iterdir():
        (workspace / path.name).write_bytes(path.read_bytes())
    return workspace
