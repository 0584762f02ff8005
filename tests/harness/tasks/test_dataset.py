"""Tasks from `datasets` tables (local parquet and jsonl; a Hub id goes through the same loader)."""

from __future__ import annotations

import json

import pytest

from openenv.harness.sandbox import LocalSandbox
from openenv.harness.tasks import builtin_task, load_dataset_tasks
from openenv.harness.verifier import verify

datasets = pytest.importorskip("datasets")


def _rows() -> list[dict]:
    task = builtin_task("fix-temperature-conversion")
    return [
        {
            "id": "temps",
            "instruction": task.instruction,
            "workspace": json.dumps(task.workspace),
            "tests": json.dumps(task.tests),
            "solution": task.solution,
            "timeout_s": 120.0,
            "difficulty": "easy",
        }
    ]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_local_table_rows_become_runnable_tasks(tmp_path, suffix):
    path = tmp_path / f"tasks{suffix}"
    table = datasets.Dataset.from_list(_rows())
    if suffix == ".parquet":
        table.to_parquet(str(path))
    else:
        table.to_json(str(path), lines=True)
    [task] = load_dataset_tasks(str(path))
    assert task.id == "temps" and task.source == "datasets" and task.timeout_s == 120
    assert task.metadata == {"difficulty": "easy"}
    with LocalSandbox() as box:
        box.write_files(task.workspace)
        box.run(["sh", "-c", task.solution])
        assert verify(box, task).solved
