"""A Harbor task directory and a `datasets` table each run one real episode (pi, oracle policy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv.harness.environment import HarnessEnvironment
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task, load_dataset_tasks, load_harbor_task

pytestmark = pytest.mark.slow


def _harbor_dir(root: Path) -> Path:
    """A Harbor task as Harbor writes them, with container paths (/app, /tests, /logs/verifier)."""
    task = root / "count-lines"
    for sub in ("tests", "solution", "environment/app"):
        (task / sub).mkdir(parents=True)
    (task / "instruction.md").write_text("Write the number of lines of data.txt into count.txt.\n")
    (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = 120.0\n')
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\nCOPY app/ /app/\n")
    (task / "environment" / "app" / "data.txt").write_text("a\nb\nc\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\ncd /app\n"
        'if [ "$(cat count.txt)" = 3 ]; then echo 1 > /logs/verifier/reward.txt;'
        " else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nwc -l < data.txt | tr -d ' ' > count.txt\n")
    return task


def _episode(capture_server, task):
    env = HarnessEnvironment("pi", server=capture_server)
    try:
        return run_episode(env, task, policy="oracle")[1]
    finally:
        env.close()


def test_harbor_task_directory_episode(capture_server, tmp_path, require_harness, no_leftover_processes):
    require_harness("pi")
    summary = _episode(capture_server, load_harbor_task(_harbor_dir(tmp_path)))
    assert summary.reward == 1.0 and summary.reward_breakdown["reward"] == 1.0
    assert summary.task == "count-lines" and summary.merge_ratio == 1.0


def test_datasets_table_episode(capture_server, tmp_path, require_harness, no_leftover_processes):
    require_harness("pi")
    datasets = pytest.importorskip("datasets")
    source = builtin_task("fix-mutable-default-argument")
    row = {
        "id": "tags-from-table",
        "instruction": source.instruction,
        "workspace": json.dumps(source.workspace),
        "tests": json.dumps(source.tests),
        "solution": source.solution,
    }
    path = tmp_path / "tasks.parquet"
    datasets.Dataset.from_list([row]).to_parquet(str(path))
    [task] = load_dataset_tasks(str(path))
    summary = _episode(capture_server, task)
    assert summary.reward == 1.0 and summary.reward_breakdown["tests_total"] == 3
