"""Tasks from a Hugging Face `datasets` table: a Hub dataset name, or a local parquet/jsonl file.

Each row holds the `Task` fields; `workspace` and `tests` may be JSON strings (as parquet stores them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openenv.harness.tasks.model import Task

__all__ = ["load_dataset_tasks", "task_from_row"]

_LOCAL_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}


def task_from_row(row: dict[str, Any]) -> Task:
    """Build a Task from one table row (extra columns go to `metadata`)."""
    fields = dict(row)
    for key in ("workspace", "tests", "metadata"):
        if isinstance(fields.get(key), str):
            fields[key] = json.loads(fields[key])
    known = set(Task.model_fields)
    extra = {k: str(v) for k, v in fields.items() if k not in known and v is not None}
    fields = {k: v for k, v in fields.items() if k in known and v is not None}
    fields["metadata"] = {**fields.get("metadata", {}), **extra}
    return Task.model_validate({**fields, "source": "datasets"})


def load_dataset_tasks(name_or_path: str, *, split: str = "train") -> list[Task]:
    """Load every row of a dataset as a Task.

    Args:
        name_or_path: a local `.parquet`/`.jsonl`/`.json` file, or a Hub dataset id (`org/name`).
        split: the split to read.
    """
    from datasets import load_dataset  # heavy; only when a dataset is asked for

    path = Path(name_or_path)
    if path.suffix in _LOCAL_FORMATS and path.exists():
        table = load_dataset(_LOCAL_FORMATS[path.suffix], data_files=str(path), split=split)
    else:
        table = load_dataset(name_or_path, split=split)
    return [task_from_row(row) for row in table]
