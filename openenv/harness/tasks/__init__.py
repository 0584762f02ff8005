"""Tasks: the `Task` model and its loaders (built-in set, Harbor directories, `datasets` tables)."""

from __future__ import annotations

from openenv.harness.tasks.builtin import builtin_task, builtin_task_ids, builtin_tasks
from openenv.harness.tasks.dataset import load_dataset_tasks, task_from_row
from openenv.harness.tasks.harbor import load_harbor_task
from openenv.harness.tasks.model import Task
from openenv.harness.tasks.sets import find_task, load_task_set

__all__ = [
    "Task",
    "builtin_task",
    "builtin_task_ids",
    "builtin_tasks",
    "find_task",
    "load_dataset_tasks",
    "load_harbor_task",
    "load_task_set",
    "task_from_row",
]
